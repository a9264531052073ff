package netns

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// churningKernel answers a dump of the links as the kernel does while
// links are added and removed meanwhile: interrupted, the first
// interrupted times (-1: always).
type churningKernel struct {
	routeNetlink
	interrupted int
	calls       int
	at          []time.Time
}

func (k *churningKernel) LinkList() ([]netlink.Link, error) {
	k.calls++
	k.at = append(k.at, time.Now())
	lo := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Index: 1}}
	if k.interrupted < 0 || k.calls <= k.interrupted {
		// netlink v1.3.1 returns what it read along with the error.
		return []netlink.Link{lo}, netlink.ErrDumpInterrupted
	}
	return []netlink.Link{lo}, nil
}

// A dump of the links the kernel interrupts is tried again after a pause
// that grows (starting at about a millisecond), not at once: links that
// churn in a burst settle meanwhile. When the kernel still interrupts it
// after about a second of pauses, the error says that the link table kept
// changing and to retry.
func TestLinksRetriesAnInterruptedDumpAfterAPause(t *testing.T) {
	t.Run("settles", func(t *testing.T) {
		k := &churningKernel{interrupted: 4}
		h := &Handle{nl: k, current: true}
		ls, err := h.Links()
		if err != nil || len(ls) != 1 || ls[0].Name != "lo" {
			t.Fatalf("Links after 4 interrupted dumps: %v %v, want lo", ls, err)
		}
		if k.calls != 5 {
			t.Fatalf("%d dumps, want 5", k.calls)
		}
		for i := 1; i < len(k.at); i++ {
			if gap, want := k.at[i].Sub(k.at[i-1]), time.Millisecond<<(i-1); gap < want {
				t.Errorf("dump %d came %s after dump %d, want a pause of at least %s (doubling from 1 ms)", i+1, gap, i, want)
			}
		}
	})
	t.Run("keeps changing", func(t *testing.T) {
		k := &churningKernel{interrupted: -1}
		h := &Handle{nl: k, current: true}
		start := time.Now()
		_, err := h.Links()
		took := time.Since(start)
		if err == nil {
			t.Fatal("Links succeeded on a dump the kernel always interrupts")
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			t.Errorf("error %v does not wrap netlink.ErrDumpInterrupted", err)
		}
		for _, w := range []string{"list links", "the host's link table kept changing", "retry"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		if took < 900*time.Millisecond || took > 5*time.Second {
			t.Errorf("gave up after %s and %d dumps, want about a second of pauses", took, k.calls)
		}
	})
}
