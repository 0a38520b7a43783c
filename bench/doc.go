// Command bench runs walq and the queues a user would pick instead through
// the same workloads, side by side, and reports what each one did.
//
// # Basics
//
//	go run . -quick                      # about two minutes
//	go run .                             # the full matrix, about 30 minutes
//	go run . -systems walq,bbolt -workloads cycle -n 50000
//	go run . -json results.json -chart results.svg
//
// Every system is opened in a fresh directory for every run. Within one cell
// of the matrix (workload, payload size, producers, consumers) the systems
// run in alternating rounds, each round in an order of its own (A C B, B A
// C, …, shuffled from a printed seed that -seed replays), so that a noisy
// neighbour hurts every system alike and none always runs first; the table
// shows each system's median throughput, its min–max over the rounds, and
// its ratio to walq computed round by round.
//
// Every run checks what came out: the count, every payload byte, and the FIFO
// order where the system promises it. A lost, duplicated, damaged or
// reordered message is printed in the errors column of its row, never
// hidden.
//
// # Systems
//
// A system is an adapter in a file of its own (sys_*.go) that turns a queue
// library into the small Queue interface of system.go. Lower bounds (a bare
// append+fdatasync loop and bare tidwall/wal) only append; they take part in
// the durable-enqueue workloads.
//
// # Caveats
//
// The machine is shared: run with -rounds 5 or more for figures to publish.
// Open times are measured with a warm page cache; the harness never drops
// caches. RSS for the backlog workload is measured in a child process running
// one system (`bench child grow|drain`, see backlog.go), so the harness's own
// memory is not counted; anonymous RSS is reported beside it, since a store
// mapped into memory (bbolt's) counts in RSS. The crash workload (crash.go)
// times the open of a store whose child process was killed with SIGKILL.
//
// The program exits non-zero when a walq row reports an error; README.md
// describes every workload, every peer's configuration and the output.
package main
