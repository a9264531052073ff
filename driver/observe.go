package driver

import (
	"errors"
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
)

// Observer is told of the events the daemon's metrics count. StateWrite is
// called without the driver's lock, GIDsReady and GIDsTimedOut with it held
// (where a watch's outcome is recorded): every method must return at once
// and call nothing of the driver.
type Observer interface {
	// StateWrite: one change of the state directory (a record written or
	// removed) took the time given; outcome is "ok", "not_durable" (done, the sync
	// failed) or "failed".
	StateWrite(took time.Duration, outcome string)
	// GIDsReady: an endpoint's GID entries were found sinceJoin after the
	// Join that started its watch.
	GIDsReady(sinceJoin time.Duration)
	// GIDsTimedOut: an endpoint's watch ended without its entries.
	GIDsTimedOut()
}

// observing holds the Observer and when each endpoint being watched
// joined. A watch that a restart began (restore) has no Join time and is
// not timed.
type observing struct {
	o      Observer // nil: nothing is told
	mu     sync.Mutex
	joined map[string]time.Time // by endpoint ID
}

// join records that endpoint id joined at at and its watch began.
func (ob *observing) join(id string, at time.Time) {
	if ob == nil || ob.o == nil {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.joined == nil {
		ob.joined = map[string]time.Time{}
	}
	ob.joined[id] = at
}

// watchEnded reports the outcome of endpoint id's watch: its entries
// found in a read that began at at, or not (ready false).
func (ob *observing) watchEnded(id string, ready bool, at time.Time) {
	if ob == nil || ob.o == nil {
		return
	}
	ob.mu.Lock()
	joined, ok := ob.joined[id]
	delete(ob.joined, id)
	ob.mu.Unlock()
	switch {
	case !ready:
		ob.o.GIDsTimedOut()
	case ok:
		ob.o.GIDsReady(max(at.Sub(joined), 0))
	}
}

// forget drops endpoint id (deleted).
func (ob *observing) forget(id string) {
	if ob == nil || ob.o == nil {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	delete(ob.joined, id)
}

// stateWrite reports one change of the state directory that began at start
// and ended with err, and returns err.
func (ob *observing) stateWrite(start time.Time, err error) error {
	if ob == nil || ob.o == nil {
		return err
	}
	outcome := "ok"
	var nd *atomicfile.NotDurableError
	switch {
	case errors.As(err, &nd):
		outcome = "not_durable"
	case err != nil:
		outcome = "failed"
	}
	ob.o.StateWrite(time.Since(start), outcome)
	return err
}
