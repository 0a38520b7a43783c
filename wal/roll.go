package wal

// rollPlan says where tidwall/wal will put each entry of a batch. The
// committer computes it before WriteBatch instead of asking tidwall/wal,
// which does not expose offsets, and checks afterwards that the files it
// predicts exist with the sizes it predicts.
type rollPlan struct {
	offs   []int64 // offs[i]: byte offset of entry i's frame in its segment
	starts []int   // batch positions where a new segment starts, ascending; len(frames) for a new empty tail
	sealed []int64 // sealed[j]: final size of the segment closed by roll j
	tail   int64   // bytes in the tail segment after the batch
}

// planRolls replicates the roll rule of tidwall/wal v1.2.1's writeBatch:
// before the batch, a tail of more than segSize bytes is sealed; after each
// entry, a tail of at least segSize bytes is sealed. Sealing means fsync,
// close and create the next file, named by the index of the entry that
// will come next (so a batch that fills a segment exactly leaves a new,
// empty tail). tail is the tail's size before the batch; frames are the
// framed sizes of the batch's entries.
func planRolls(tail, segSize int64, frames []int64) rollPlan {
	p := rollPlan{offs: make([]int64, len(frames))}
	if tail > segSize {
		p.starts, p.sealed, tail = append(p.starts, 0), append(p.sealed, tail), 0
	}
	for i, n := range frames {
		p.offs[i] = tail
		tail += n
		if tail >= segSize {
			p.starts, p.sealed, tail = append(p.starts, i+1), append(p.sealed, tail), 0
		}
	}
	p.tail = tail
	return p
}
