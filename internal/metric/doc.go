// Package metric records histograms with fixed, power-of-two buckets
// using atomic operations only, so that a hot path can observe a value
// for the price of three atomic adds and never takes a lock.
//
// A Histogram's zero value is ready to use. Observe may be called from
// any number of goroutines; Snapshot may run at the same time and returns
// a view that is consistent bucket by bucket (a value observed during the
// snapshot may be counted in Count but not yet in its bucket, or the other
// way round; the difference is at most the observations in flight).
package metric
