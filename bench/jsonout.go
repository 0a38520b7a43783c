package main

import (
	"encoding/json"
	"io"
	"math"
)

// jsonResult is one line of the -json file. The first twelve fields are the
// stable interface; the rest add detail.
type jsonResult struct {
	System    string    `json:"system"`
	Workload  string    `json:"workload"`
	Mode      string    `json:"mode"`
	Payload   int       `json:"payload"`
	Producers int       `json:"producers"`
	Consumers int       `json:"consumers"`
	OpsPerSec float64   `json:"ops_per_sec"`
	P50us     float64   `json:"p50_us"`
	P99us     float64   `json:"p99_us"`
	RSSBytes  int64     `json:"rss_bytes"`
	DiskBytes int64     `json:"disk_bytes"`
	Errors    []string  `json:"errors"`
	Family    string    `json:"family"`
	Rounds    int       `json:"rounds"`
	OpsMin    float64   `json:"ops_per_sec_min"`
	OpsMax    float64   `json:"ops_per_sec_max"`
	OpsRounds []float64 `json:"ops_per_sec_rounds"`
	Reference string    `json:"reference"`
	Ratio     *float64  `json:"ratio_to_reference"` // null when the reference did not run
	Messages  int64     `json:"messages"`
	SizeBytes int64     `json:"size_bytes,omitempty"`
	OpenMs    float64   `json:"open_ms,omitempty"`
	Config    string    `json:"config"`
	Curve     []point   `json:"curve,omitempty"`
	AnonRSS   int64     `json:"rss_anon_bytes"`
	Note      string    `json:"note,omitempty"`
}

// writeJSON writes one JSON object per row, one per line.
func writeJSON(w io.Writer, rows []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		j := jsonResult{
			System: r.System, Workload: r.Workload, Mode: r.Mode, Payload: r.Payload,
			Producers: r.Producers, Consumers: r.Consumers, OpsPerSec: r.OpsPerSec,
			P50us: float64(r.P50) / 1e3, P99us: float64(r.P99) / 1e3,
			RSSBytes: r.RSS, DiskBytes: r.Disk, Errors: r.Errors,
			Family: r.Family, Rounds: r.Rounds, OpsMin: r.OpsMin, OpsMax: r.OpsMax, OpsRounds: r.Ops,
			Reference: r.Reference, Messages: r.Messages, SizeBytes: r.Size,
			OpenMs: float64(r.Open) / 1e6, Config: r.Config, Curve: r.Curve,
			AnonRSS: r.AnonRSS, Note: r.Note,
		}
		if j.Errors == nil {
			j.Errors = []string{}
		}
		if !math.IsNaN(r.Ratio) {
			j.Ratio = &r.Ratio
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}
