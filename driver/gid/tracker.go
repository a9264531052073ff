// Package gid follows the GID table entries of endpoints on RDMA ports:
// which entries an endpoint expects (expect.go), admission, which refuses
// an endpoint its port's table has no room for (admit.go), the cache of
// each port's table with its partial reads (table.go), the watch that
// waits for an endpoint's entries to appear, one poller per port
// (watch.go), and the check that a ready endpoint's entries stay where
// they were found (drift.go). It knows nothing of Docker's calls nor of
// the driver's records: its user tells it which endpoints exist and what became of
// them, and it reports the outcome of each watch through a callback.
//
// The Tracker has its own lock. It never holds it across a sysfs read nor
// while it calls back, so its methods that read nothing (all but Admit,
// Read and Lookup) may be called while the caller holds a lock of its own.
package gid

import (
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Port names one port of an HCA.
type Port struct {
	HCA  string
	Port int
}

// Entry is one GID table entry of an endpoint.
type Entry struct {
	Index int
	Type  string
	GID   string
}

// Config holds a Tracker's settings.
type Config struct {
	Sysfs *rdma.Sysfs
	// Timeout bounds a watch; Poll is how often a port's poller reads the
	// table.
	Timeout, Poll time.Duration
	// MaxAge lets admission use a read of the table up to this old, and
	// lets admission and the watch read only the slots that can have
	// changed since the last read (0: every slot at every read).
	MaxAge time.Duration
	// Report receives the outcome of every watch that ends by itself
	// (found, or timed out), from the port's poller, without the Tracker's
	// lock. The watch counts as running until Report returns.
	Report func(Outcome)
	// Drift, if not nil, receives each ready endpoint whose entries moved
	// (see drift.go), once until it is ready again, from whichever caller
	// read the table, without the Tracker's lock.
	Drift func(Drift)
}

// Tracker keeps the GID accounting of every port: see the package comment.
type Tracker struct {
	sys       *rdma.Sysfs
	timeout   time.Duration
	poll      time.Duration
	maxAge    time.Duration
	fullEvery time.Duration
	report    func(Outcome)
	drift     func(Drift)

	readMu sync.Mutex // one table read at a time

	mu        sync.Mutex
	eps       map[string]*endpoint          // by endpoint ID
	unsettled map[Port]map[string]*endpoint // admission's accounting, see heldOn
	tables    map[Port]snapshot
	checked   map[Port]driftChecked // the last drift check of each port
	readyGen  uint64                // counts track calls (see checkDrift)
	going     map[Port]map[int]bool // slots of entries going
	watches   map[string]*watch     // by endpoint ID
	pollers   map[Port]*poller      // one per port with watches
	pollWG    sync.WaitGroup        // the running pollers
	closing   chan struct{}         // closed by Close: pollers stop
}

// endpoint is what the Tracker knows of one endpoint (or of the
// reservation admission made for it).
type endpoint struct {
	id      string
	port    Port
	want    Expected
	need    int // entries it holds: its addresses times types, or what it got
	types   int // RoCE types of the port (entries per address); 0: not known
	ready   bool
	readyAt time.Time // when the read that found its entries began
	found   []Entry
	drifted bool // found moved in a later read; reported
}

// New returns a Tracker for the ports sys reads.
func New(cfg Config) *Tracker {
	return &Tracker{
		sys:       cfg.Sysfs,
		timeout:   cfg.Timeout,
		poll:      cfg.Poll,
		maxAge:    cfg.MaxAge,
		fullEvery: defaultFullEvery,
		report:    cfg.Report,
		drift:     cfg.Drift,
		eps:       make(map[string]*endpoint),
		unsettled: make(map[Port]map[string]*endpoint),
		tables:    make(map[Port]snapshot),
		checked:   make(map[Port]driftChecked),
		going:     make(map[Port]map[int]bool),
		watches:   make(map[string]*watch),
		pollers:   make(map[Port]*poller),
		closing:   make(chan struct{}),
	}
}

// Endpoint is what the user tells the Tracker of an endpoint it knows.
type Endpoint struct {
	Port Port
	Want Expected
	// Need is the number of entries it holds (see Admit); Types the RoCE
	// types of its port, 0 if not known.
	Need, Types int
	// Ready: its entries were found, in a read that began at ReadyAt;
	// Found are those entries.
	Ready   bool
	ReadyAt time.Time
	Found   []Entry
}

// Add records endpoint id, replacing what was known of it (its admission's
// reservation, say). Admission counts its entries until a table read
// after they were found shows them.
func (t *Tracker) Add(id string, e Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(id)
	t.track(&endpoint{id: id, port: e.Port, want: e.Want, need: e.Need, types: e.Types,
		ready: e.Ready, readyAt: e.ReadyAt, found: e.Found})
}

// Forget drops endpoint id (its entries are gone, or its admission is
// undone). An unknown id is no error.
func (t *Tracker) Forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(id)
}

// Reset records that endpoint id has none of its entries yet (it joined a
// container, or its watch found them missing): admission counts them as
// held again.
func (t *Tracker) Reset(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.eps[id]; ok {
		e.ready, e.readyAt, e.found, e.drifted = false, time.Time{}, nil, false
		t.track(e)
	}
}

// Left records that endpoint id left its container: its entries go with
// its addresses (partial reads look at their slots until they are empty),
// and it has none until it joins again.
func (t *Tracker) Left(id string) {
	t.mu.Lock()
	if e, ok := t.eps[id]; ok {
		t.entriesGoing(e)
	}
	t.mu.Unlock()
	t.Reset(id)
}

// Going has partial reads look at the slots of endpoint id's entries until
// they are empty: it is being deleted.
func (t *Tracker) Going(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.eps[id]; ok {
		t.entriesGoing(e)
	}
}

// Ready records that endpoint id's watch found its entries found in a read
// that began at at: from now on it holds what it got, not what it expected
// (an address the container does not have, IPv6 disabled in it, reserves
// no entries).
func (t *Tracker) Ready(id string, found []Entry, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.eps[id]; ok {
		e.ready, e.readyAt, e.found, e.need, e.drifted = true, at, found, len(found), false
		t.track(e)
	}
}

// track has admission count e's entries until a table read after they
// were found shows them, and the next drift check judge every endpoint
// (see checkDrift). Caller holds t.mu.
func (t *Tracker) track(e *endpoint) {
	t.eps[e.id] = e
	t.readyGen++
	u := t.unsettled[e.port]
	if u == nil {
		u = map[string]*endpoint{}
		t.unsettled[e.port] = u
	}
	u[e.id] = e
}

// forget drops endpoint id. Caller holds t.mu.
func (t *Tracker) forget(id string) {
	e, ok := t.eps[id]
	if !ok {
		return
	}
	delete(t.eps, id)
	if u := t.unsettled[e.port]; u[id] == e {
		delete(u, id)
	}
}
