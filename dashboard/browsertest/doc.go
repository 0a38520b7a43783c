// Package browsertest drives the dashboard's page in a real headless
// Chromium, as a person would use it. It is its own module so that the
// walq module does not depend on the browser driver.
//
// Run it with
//
//	cd dashboard/browsertest && go test ./...
//
// It needs a Chromium (or Chrome) binary on PATH, or named by
// WALQ_CHROMIUM. Without one the tests are skipped, except under CI=true,
// where they fail. With -screenshot=FILE a test runs a short workload and
// writes a screenshot of the page to FILE (how docs/dashboard.png is made).
package browsertest
