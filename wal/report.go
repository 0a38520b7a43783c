package wal

import "fmt"

// Damage describes one damaged region of a segment file: a torn tail that
// Open cut, entries skipped under Options.Salvage, or a problem found by
// Verify.
type Damage struct {
	Segment  string // file path
	Offset   int64  // byte offset of the damage in the segment
	Bytes    int64  // bytes cut or skipped
	Entries  int    // whole entries lost, where known; for damage a salvage skipped, as many as its frame lengths delimit within the bounds its bytes and LSNs prove (a length is covered by no CRC)
	FirstLSN LSN    // first LSN lost, 0 when unknown
	LastLSN  LSN    // last LSN lost, 0 when unknown; FirstLSN-1 when none was (a torn witness, which holds no record)
	Reason   string
}

func (d Damage) String() string {
	var lost string
	switch {
	case d.FirstLSN == 0:
		lost = "LSNs unknown"
	case d.LastLSN == 0:
		lost = fmt.Sprintf("LSNs from %d (the last one unknown)", d.FirstLSN)
	case d.LastLSN+1 == d.FirstLSN:
		lost = "no LSN"
	case d.FirstLSN == d.LastLSN:
		lost = fmt.Sprintf("LSN %d", d.FirstLSN)
	default:
		lost = fmt.Sprintf("LSNs %d-%d", d.FirstLSN, d.LastLSN)
	}
	entries := "1 entry"
	if d.Entries != 1 {
		entries = fmt.Sprintf("%d entries", d.Entries)
	}
	return fmt.Sprintf("%s offset %d: %d bytes, %s, %s: %s", d.Segment, d.Offset, d.Bytes, entries, lost, d.Reason)
}

// Report says what Open repaired or skipped. From Verify, Torn is a torn
// tail that Open would cut and Salvaged lists every other damaged region.
type Report struct {
	Torn     *Damage  // tail cut on Open; nil when the tail was clean
	Salvaged []Damage // entries skipped under Options.Salvage
}

// clone returns a deep copy so callers cannot alter the Log's report.
func (r Report) clone() Report {
	out := Report{Salvaged: append([]Damage(nil), r.Salvaged...)}
	if r.Torn != nil {
		t := *r.Torn
		out.Torn = &t
	}
	return out
}
