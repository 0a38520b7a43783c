// Package queuetest checks that an engine of walq keeps the guarantees of
// the ack queue documented in package queue, in the manner of
// testing/fstest.TestFS: TestAckQueue runs one subtest per guarantee
// against the queues a constructor opens. The embedded queue runs it in
// package queue's tests and the Redis backend in redisq's.
//
//	func TestConformance(t *testing.T) {
//		queuetest.TestAckQueue(t, queuetest.Engine{Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
//			...
//		}})
//	}
//
// Every subtest runs on a fresh queue whose time comes from a manual clock
// (Options.Clock), so that lease deadlines and delays are exercised without
// sleeping. Expired leases end only through RequeueExpired: the engine must
// open its queues with automatic requeueing off (queue.Options.ManualRequeue).
//
// Where an engine cannot give a guarantee, Engine is to say so in a field,
// and the subtest checks the engine's documented behaviour instead: a
// difference is tested, never skipped. Today the two engines differ in no
// subtest.
package queuetest
