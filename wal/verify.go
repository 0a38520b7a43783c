package wal

import "fmt"

// Verify reads every entry of every segment and checks framing, CRC,
// version, entry counts and LSN continuity, without changing anything. It
// works on a read-only Log (whose torn tail is still on disk) as well as on
// a live one (it reads what was written when it looks at each segment).
// The Report lists a torn tail in Torn (on a read-only Log, a torn roll
// its Open found too, though its sealed segment may end whole) and every
// other damaged region in Salvaged; the error wraps ErrCorrupt if anything but a torn tail is
// found.
func (l *Log) Verify() (Report, error) {
	if l.closed.Load() {
		return Report{}, ErrClosed
	}
	views, err := l.viewSegments()
	defer func() {
		for _, v := range views {
			_ = v.file.release()
		}
	}()
	if err != nil {
		return Report{}, err
	}
	damage := make([][]Damage, len(views))
	results := make([]scanResult, len(views))
	var rep Report
	for i, v := range views {
		res, err := scanSegment(&segReader{f: v.file.f}, scanSpec{seg: v.seg, limit: v.size, resync: true})
		if err != nil {
			return rep, err
		}
		results[i], damage[i] = res, res.damage
	}
	if n := len(views) - 1; n >= 0 && len(damage[n]) > 0 {
		prevEnd := LSN(0) // the end of the segment before, when whole: what damage at the tail's start follows
		if n > 0 && len(damage[n-1]) == 0 && results[n-1].entries > 0 {
			prevEnd = results[n-1].endLSN
		}
		torn, res, err := verifyTear(views[n], prevEnd)
		if err != nil {
			return rep, err
		}
		if torn != nil {
			rep.Torn, damage[n], results[n] = torn, nil, res
		}
	}
	if t := l.tornRollFound(); t != nil && (rep.Torn == nil || rep.Torn.Segment == t.Segment) {
		rep.Torn = t // the same tear, said as a roll's; or one on an entry boundary, which no scan sees
	}
	rep.Salvaged = verifyContinuity(views, results, damage)
	l.reached(&rep, lastPath(l.dir, views), recordsEndOf(results))
	if len(rep.Salvaged) > 0 {
		return rep, fmt.Errorf("%w: %d damaged regions, the first: %s", ErrCorrupt, len(rep.Salvaged), rep.Salvaged[0])
	}
	return rep, nil
}

// verifyTear reports the damage of the last segment v as a torn write
// when the tear rule says it is one (repair.go): nothing valid follows the
// first damage, or only entries that show a torn write. prevEnd is the
// end of the segment before v when it is whole (0 otherwise), where
// damage at v's start begins. It returns the tear and the scan of the
// entries before it.
func verifyTear(v segView, prevEnd LSN) (*Damage, scanResult, error) {
	r := &segReader{f: v.file.f}
	res, err := scanSegment(r, scanSpec{seg: v.seg, limit: v.size})
	if err != nil || res.bad == nil {
		return nil, res, err
	}
	want := res.endLSN
	if want == 0 {
		want = prevEnd
	}
	if _, found, err := untornAfter(r, res.bad.off, v.size, want); err != nil || found {
		return nil, res, err
	}
	d, err := tearDamage(r, v.seg.path, res.bad.off, v.size, res.endLSN, res.version, res.bad.reason)
	if err == nil && d.FirstLSN == 0 && want != 0 && d.Entries == 1 && tornWitness(r, res.bad.off, v.size, want, res.version) {
		d.FirstLSN, d.LastLSN = want, want-1 // a witness alone at the segment's start: no LSN lost
	}
	return &d, res, err
}

// segView is a pinned snapshot of one segment for Verify.
type segView struct {
	seg  *segment
	file *segFile
	size int64 // bytes to check
}

// viewSegments pins every segment. A read-only Log checks the whole tail
// file (the repair did not cut it); a live one what the committer wrote.
func (l *Log) viewSegments() ([]segView, error) {
	l.seg.RLock()
	defer l.seg.RUnlock()
	views := make([]segView, 0, len(l.seg.list))
	for _, s := range l.seg.list {
		if file := s.pin(); file != nil {
			views = append(views, segView{seg: s, file: file, size: s.size})
		}
	}
	if n := len(views) - 1; n >= 0 && l.opts.ReadOnly {
		fi, err := views[n].file.f.Stat()
		if err != nil {
			return views, fmt.Errorf("wal: verify: %w", err)
		}
		views[n].size = fi.Size()
		if views[n].size, err = zerosCut(views[n]); err != nil {
			return views, fmt.Errorf("wal: verify: %w", err)
		}
	}
	return views, nil
}

// zerosCut returns the size of the segment v without the zeros after its
// last entry: zeros a writer had ahead of the tail (extend.go), which a
// writable Open cuts as a clean end.
func zerosCut(v segView) (int64, error) {
	r := &segReader{f: v.file.f}
	res, err := scanSegment(r, scanSpec{seg: v.seg, limit: v.size})
	if err != nil || res.bad == nil {
		return v.size, err
	}
	if clean, err := zeroFilled(r, res.goodEnd, v.size); err != nil || !clean {
		return v.size, err
	}
	return res.goodEnd, nil
}

// verifyContinuity completes the LSN ranges of the damage in each segment
// and adds a Damage for every segment boundary where entry indexes or LSNs
// do not follow on and no damage explains it.
func verifyContinuity(views []segView, results []scanResult, damage [][]Damage) []Damage {
	var out []Damage
	var prevEnd LSN
	for i, v := range views {
		res := results[i]
		ds := fillLost(damage[i], prevEnd, firstLSNOf(results[i+1:]))
		if len(ds) == len(res.lone) { // not the torn tail Verify took out
			boundEntries(ds, res.lone)
		}
		if i > 0 && res.entries > 0 && prevEnd != 0 && res.firstLSN != prevEnd && !covers(out, ds, res.firstLSN-1) {
			ds = append([]Damage{{Segment: v.seg.path, FirstLSN: prevEnd, LastLSN: max(prevEnd, res.firstLSN) - 1,
				Reason: fmt.Sprintf("%s: segment starts at LSN %d, the previous one ends before LSN %d", errLSNOutOfLine, res.firstLSN, prevEnd)}}, ds...)
		}
		if i+1 < len(views) && len(damage[i]) == 0 {
			if want := views[i+1].seg.firstIndex - v.seg.firstIndex; uint64(res.entries) != want {
				ds = append(ds, Damage{Segment: v.seg.path, Offset: v.size,
					Reason: fmt.Sprintf("segment holds %d entries but the next one starts %d entries after it", res.entries, want)})
			}
		}
		out = append(out, ds...)
		if res.entries > 0 {
			prevEnd = res.endLSN
		}
	}
	return out
}

// firstLSNOf returns the first LSN of the first scan result with records.
func firstLSNOf(results []scanResult) LSN {
	for _, r := range results {
		if r.entries > 0 {
			return r.firstLSN
		}
	}
	return 0
}

// recordsEndOf returns the LSN after the last record the scans found, or 0.
func recordsEndOf(results []scanResult) LSN {
	for i := len(results) - 1; i >= 0; i-- {
		if results[i].entries > 0 {
			return results[i].endLSN
		}
	}
	return 0
}

// lastPath returns the path of the last segment viewed, or dir when none.
func lastPath(dir string, views []segView) string {
	if len(views) == 0 {
		return dir
	}
	return views[len(views)-1].seg.path
}
