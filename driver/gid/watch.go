package gid

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// watch follows one endpoint's GID entries. Its port's poller alone reads
// and changes the fields below done.
type watch struct {
	id       string
	port     Port
	want     Expected
	types    int       // RoCE types of the port (entries per address)
	start    time.Time // its first look comes one poll interval later
	deadline time.Time
	done     chan struct{} // closed when the watch ends, whatever the reason
	once     sync.Once     // closes done

	grace   int // polls left for optional GIDs once the required are there; -1: not yet
	missing []string
	last    rdma.GIDTable // the last table read
	lastAt  time.Time     // when its read began
}

// poller reads one port's GID table for every endpoint waiting on it, and
// stops when none waits.
type poller struct {
	port    Port
	watches map[string]*watch // by endpoint ID; guarded by Tracker.mu
}

// Outcome is how a watch ended by itself.
type Outcome struct {
	ID   string
	Port Port
	// Found are the endpoint's entries, when it is ready (Reason ""); At
	// is when the read that found them began.
	Found  []Entry
	Reason string // why the endpoint is not RDMA-ready
	At     time.Time

	t *Tracker
	w *watch
}

// Current reports whether the watch is still the endpoint's: not stopped
// nor replaced by a newer one.
func (o Outcome) Current() bool {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	return o.t.watches[o.ID] == o.w
}

// Take ends the watch as the endpoint's and reports whether it was still
// current. The receiver of an outcome takes it while it holds whatever
// orders its changes of the endpoint with those that stop the watch (the
// claim on the endpoint); an outcome it cannot take is stale: dropped.
func (o Outcome) Take() bool {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if o.t.watches[o.ID] != o.w {
		return false
	}
	o.t.unwatch(o.w)
	return true
}

// Watch has the poller of endpoint id's port look for its entries until
// they are all there or the timeout passes; it ends any earlier watch of
// id. It never blocks. It returns false (and watches nothing) for an
// endpoint the Tracker does not know.
func (t *Tracker) Watch(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopWatch(id)
	e, ok := t.eps[id]
	if !ok {
		return false
	}
	now := time.Now()
	w := &watch{id: id, port: e.port, want: e.want,
		// Admission learned the port's RoCE types; reuse them instead of
		// reading them once more (0: not known).
		types: e.types, start: now, deadline: now.Add(t.timeout), done: make(chan struct{}), grace: -1}
	t.watches[id] = w
	p, ok := t.pollers[w.port]
	if !ok {
		p = &poller{port: w.port, watches: map[string]*watch{}}
		t.pollers[w.port] = p
		t.pollWG.Add(1)
		go t.run(p)
	}
	p.watches[id] = w
	return true
}

// StopWatch ends endpoint id's watch, if any: its outcome is not reported.
func (t *Tracker) StopWatch(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopWatch(id)
}

// Watching reports whether endpoint id has a watch running.
func (t *Tracker) Watching(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watches[id] != nil
}

// Done returns a channel closed when endpoint id's running watch ends
// (after its outcome is reported), or nil when it has none.
func (t *Tracker) Done(id string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.watches[id]; ok {
		return w.done
	}
	return nil
}

// Close ends every watch and waits for the pollers to stop.
func (t *Tracker) Close() {
	t.mu.Lock()
	for _, w := range t.watches {
		t.unwatch(w)
		w.end()
	}
	select {
	case <-t.closing:
	default:
		close(t.closing)
	}
	t.mu.Unlock()
	t.pollWG.Wait()
}

// stopWatch ends endpoint id's watch. Caller holds t.mu.
func (t *Tracker) stopWatch(id string) {
	if w, ok := t.watches[id]; ok {
		t.unwatch(w)
		w.end()
	}
}

// unwatch takes w off its port. Caller holds t.mu.
func (t *Tracker) unwatch(w *watch) {
	delete(t.watches, w.id)
	if p, ok := t.pollers[w.port]; ok {
		delete(p.watches, w.id)
	}
}

// end tells whoever waits on w that it is over.
func (w *watch) end() { w.once.Do(func() { close(w.done) }) }

// optionalGrace is how many more polls the watch looks for an endpoint's
// optional GIDs once its required ones are there. The kernel adds the
// entries of all the addresses libnetwork sets within one poll or two; one
// that has not come by then (IPv6 disabled in the container) never will.
const optionalGrace = 4

// run reads the GID table of one port every poll interval, one read for
// all the endpoints waiting on it, and ends their watches as their entries
// appear or their time runs out. The table is read without t.mu.
func (t *Tracker) run(p *poller) {
	defer t.pollWG.Done()
	tick := time.NewTicker(t.poll)
	defer tick.Stop()
	var ws []*watch
	for {
		select {
		case <-t.closing:
			return
		case <-tick.C:
		}
		now := time.Now()
		t.mu.Lock()
		if len(p.watches) == 0 {
			if t.pollers[p.port] == p {
				delete(t.pollers, p.port)
			}
			t.mu.Unlock()
			return
		}
		ws = ws[:0]
		for _, w := range p.watches {
			// The first look waits one interval: libnetwork sets the
			// addresses only after Join returns, so a look at Join time
			// cannot find their entries.
			if now.Sub(w.start) >= t.poll || now.After(w.deadline) {
				ws = append(ws, w)
			}
		}
		t.mu.Unlock()
		if len(ws) > 0 {
			t.look(p.port, ws, now)
		}
	}
}

// look reads the table once for the watches ws and ends those whose
// entries are there or whose time is up.
func (t *Tracker) look(port Port, ws []*watch, now time.Time) {
	how, more, fullAge := readChanges, 0, time.Duration(0)
	for _, w := range ws {
		more += len(w.want.observed()) * max(w.types, 1)
		if now.After(w.deadline) {
			how = readFull // a timeout is decided on every slot
		}
		if slow := slowWatch * t.poll; now.Sub(w.start) >= slow {
			fullAge = slow // slower than a start: look everywhere
		}
	}
	table, at, _, err := t.table(port, how, more, fullAge)
	for _, w := range ws {
		if len(w.want.Required) == 0 {
			t.finish(w, nil, "the endpoint has no IP address; RoCE needs one", at)
			continue
		}
		if err == nil {
			if w.types <= 0 {
				w.types = t.sys.RoCETypesPerAddress(port.HCA, port.Port)
			}
			// Counting needs no sysfs read; the entries' types are read
			// once, when the watch ends.
			w.last, w.lastAt = table, at
			w.missing = missingIn(table, w.want.Required, w.types)
			optional := missingIn(table, w.want.Optional, w.types)
			switch {
			case len(w.missing) > 0:
				w.grace = -1 // an entry went again: start over
			case len(optional) == 0 || w.grace == 0:
				t.finish(w, t.foundIn(port, table, w.want), "", at)
				continue
			case w.grace < 0:
				w.grace = optionalGrace
			default:
				w.grace--
			}
		} else if w.missing == nil {
			w.missing = w.want.Required
		}
		if now.After(w.deadline) {
			if w.grace >= 0 {
				t.finish(w, t.foundIn(port, w.last, w.want), "", w.lastAt)
			} else {
				t.finish(w, nil, t.notReadyReason(port, w.missing), at)
			}
		}
	}
}

// finish reports the outcome of w, and ends it.
func (t *Tracker) finish(w *watch, found []Entry, reason string, at time.Time) {
	if t.report != nil {
		t.report(Outcome{ID: w.id, Port: w.port, Found: found, Reason: reason, At: at, t: t, w: w})
	}
	t.mu.Lock()
	if t.watches[w.id] == w {
		t.unwatch(w)
	}
	t.mu.Unlock()
	w.end()
}

func (t *Tracker) notReadyReason(p Port, missing []string) string {
	reason := fmt.Sprintf("GID entries for %s did not appear in the table of %s port %d within %s",
		strings.Join(missing, ", "), p.HCA, p.Port, t.timeout)
	if pi, err := t.sys.Port(p.HCA, p.Port); err == nil {
		if table, err := t.sys.GIDs(p.HCA, p.Port); err == nil {
			free := pi.GIDTableSize - len(table)
			if free <= 0 {
				return reason + ": the table is full (the kernel logs __ib_cache_gid_add ... error=-28); stop containers on this port, then restart this one"
			}
			reason += fmt.Sprintf(" (%d of %d entries free)", free, pi.GIDTableSize)
		}
		if !pi.Active() {
			reason += fmt.Sprintf("; the port is %s", pi.State)
		}
	}
	return reason + " (check: ip addr in the container; cat /sys/class/infiniband/" + p.HCA + "/ports/" + fmt.Sprint(p.Port) + "/gids/*)"
}
