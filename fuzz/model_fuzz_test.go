package fuzz_test

import "testing"

// The model fuzzers' input bounds: at most this many bytes and operations
// (an operation takes one to three bytes). Enough for a few hundred
// messages of up to 4 KiB to roll 4 KiB segments many times over.
const (
	maxModelInput = 2048
	maxModelOps   = 400
)

// modelChecker is one run of a model fuzzer: a real queue and its model,
// driven one operation at a time and compared as they go and at the end.
type modelChecker interface {
	step(in *opReader) // reads one operation from in and runs it on both
	finish()           // compares what is left on both
	close()            // closes the real queue
}

// fuzzModel adds seeds to f and fuzzes each input: cut to maxModelInput
// bytes, it starts a run (start reads the run's header from in), which
// then takes at most maxModelOps operations before it finishes.
func fuzzModel[R modelChecker](f *testing.F, seeds [][]byte, start func(t *testing.T, in *opReader) R) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > maxModelInput {
			ops = ops[:maxModelInput]
		}
		in := &opReader{b: ops}
		r := start(t, in)
		defer r.close()
		for n := 0; n < maxModelOps && !in.done(); n++ {
			r.step(in)
		}
		r.finish()
	})
}
