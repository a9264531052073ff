package netns

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Pauses between the tries of a dump the kernel interrupted: the first,
// doubled after each try, until they add up to dumpPausesMax. A burst of
// link changes (a host starting or stopping many containers) settles
// meanwhile; a table that changes all second long is reported instead.
const (
	dumpFirstPause = time.Millisecond
	dumpPausesMax  = time.Second
)

// redump runs dump until the kernel answers it whole. The kernel marks a
// dump interrupted when the table changed while it was being read (netlink
// v1.3.1 then returns ErrDumpInterrupted with what it read, and does not
// try again itself); such a dump, or one a signal cut (EINTR), is run
// again after a pause (see dumpFirstPause). table names what is dumped in
// the error when the kernel still interrupts it at the end.
func redump[T any](table string, dump func() (T, error)) (T, error) {
	var paused time.Duration
	pause := dumpFirstPause
	for tries := 1; ; tries++ {
		v, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) && !errors.Is(err, unix.EINTR) {
			return v, err
		}
		if paused >= dumpPausesMax {
			var zero T
			return zero, fmt.Errorf("%s kept changing while the kernel listed it (%d tries over %s, each cut short by a change): retry in a moment: %w",
				table, tries, paused, err)
		}
		p := min(pause, dumpPausesMax-paused)
		time.Sleep(p)
		paused += p
		pause *= 2
	}
}

// linkTable names h's link table in errors.
func (h *Handle) linkTable() string {
	if h.current {
		return "the host's link table"
	}
	return "the link table of network namespace " + h.ns.String()
}
