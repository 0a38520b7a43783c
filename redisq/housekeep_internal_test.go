package redisq

import (
	"testing"
	"time"
)

// A deadline announced before the housekeeper has armed its timer (while
// its first pass runs) must wake it: that pass may have read the server
// before the deadline was set, and would then sleep for idleRecheck.
func TestAnnouncedBeforeArmed(t *testing.T) {
	h := newHandle(nil, nil, "", Options{})
	h.announced("t" + unixMicros(time.Now().Add(time.Hour)))
	select {
	case <-h.kick:
	default:
		t.Fatal("a deadline announced before the first pass armed the timer did not wake the housekeeper")
	}
}
