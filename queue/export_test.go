package queue

// TornTail appends bytes that are no record to the log's last segment of
// the queue in dir, for the black-box tests (package queue_test); the
// helper itself (tornTail) lives beside the white-box tests that use it.
var TornTail = tornTail
