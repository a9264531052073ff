package gid

import (
	"fmt"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/rdma"
)

// Request is what admission needs to know of a new endpoint.
type Request struct {
	Port Port
	Want Expected
	// Types is the number of RoCE types of the port (entries per address).
	Types int
	// Collect, if not nil, is asked to free the entries of endpoints that
	// are gone when the table is too full on a read of every slot; it
	// returns how many it forgot (with Forget). Called without the
	// Tracker's lock.
	Collect func() int
}

// FullError is admission's refusal: the port's table cannot hold the
// endpoint's entries.
type FullError struct {
	Port Port
	// Need entries for Addresses addresses; Free in the table now, of
	// Size (the slots the kernel would hand out: not the reserved default
	// ones, not those it passed over); Held for Starting endpoints whose
	// entries the table does not show yet; PassedOver: slots that read
	// empty but that the kernel passed over when it last added an entry.
	Need, Addresses, Free, Size, Held, Starting, PassedOver int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("GID table of RDMA device %s port %d is too full: %d entries needed, %d of %d free, %d held for %d endpoints still starting%s",
		e.Port.HCA, e.Port.Port, e.Need, e.Free, e.Size, e.Held, e.Starting, e.PassedOverNote())
}

// PassedOverNote says, when there are any, why slots that read empty do
// not count as free ("" when none).
func (e *FullError) PassedOverNote() string {
	if e.PassedOver == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more slots read empty but the kernel passed over them when it last added an entry: entries deleted while a process still uses them (a container disconnected from the network while its workload runs), freed when it closes its RDMA resources or stops",
		e.PassedOver)
}

// Admit reserves room in the table of r.Port for the entries of endpoint
// id (its addresses times the port's RoCE types), or refuses it with a
// *FullError. It counts the free slots of the table and subtracts what
// the endpoints not yet seen in it will take, so that concurrent starts
// cannot overcommit; it looks only at the port's unsettled endpoints, not
// at every endpoint. It may admit on a read of the table up to MaxAge old
// or on a partial read, but a refusal is decided on a read of every slot,
// after r.Collect has had its chance. It returns the number of entries
// reserved. The reservation counts until Add replaces it or Forget drops
// it.
func (t *Tracker) Admit(id string, r Request) (need int, err error) {
	addrs := r.Want.addresses()
	need = addrs * r.Types
	e := &endpoint{id: id, port: r.Port, want: r.Want, need: need, types: r.Types}
	how := readCached
	for {
		table, at, full, err := t.table(r.Port, how, 0, 0)
		if err != nil {
			return 0, fmt.Errorf("read GID table: %w", err)
		}
		c := t.reserve(e, table, at)
		if c.ok {
			return need, nil
		}
		if !full && how != readFull {
			how = readFull // a refusal is decided on every slot of the table
			continue
		}
		if full && r.Collect != nil && r.Collect() > 0 {
			// They held reservations: look once more.
			if c = t.reserve(e, table, at); c.ok {
				return need, nil
			}
		}
		return 0, &FullError{Port: r.Port, Need: need, Addresses: addrs, Free: c.free, Size: table.Size, Held: c.held, Starting: c.starting, PassedOver: c.passed}
	}
}

// count is what reserve found: whether it reserved, the free slots (and
// those passed over, not among them), and what starting endpoints hold.
type count struct {
	ok                           bool
	free, passed, held, starting int
}

// reserve records e if table (read at at) has room for it beyond what the
// port's unsettled endpoints hold. Free slots are those the kernel would
// hand out (see pending.go).
func (t *Tracker) reserve(e *endpoint, table rdma.GIDTable, at time.Time) count {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c count
	c.held, c.starting = t.heldOn(e.port, table, at)
	free, passed := freeFor(table, e.types, t.tables[e.port].skipped, time.Now())
	c.free, c.passed = free, passed
	held := c.held
	if e.need <= free-held {
		t.forget(e.id)
		t.track(e)
		c.ok = true
	}
	return c
}

// Room reads the whole table of port p (whose endpoints take types entries
// per address) and returns it with how many more entries admission would
// give new endpoints now: the slots the kernel would hand out (see
// pending.go) less those held for endpoints not in the table yet.
func (t *Tracker) Room(p Port, types int) (rdma.GIDTable, int, error) {
	table, at, _, err := t.table(p, readFull, 0, 0)
	if err != nil {
		return table, 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	free, _ := freeFor(table, types, t.tables[p].skipped, time.Now())
	held, _ := t.heldOn(p, table, at)
	return table, max(free-held, 0), nil
}

// heldOn counts the entries that endpoints on port p will take and table
// (read at at) does not show yet. Entries already there are counted in the
// table, not twice. An endpoint whose entries were found in a read no newer
// than at is settled: table shows them, and every later table will, so it
// leaves the accounting for good. Caller holds t.mu.
func (t *Tracker) heldOn(p Port, table rdma.GIDTable, at time.Time) (held, starting int) {
	u := t.unsettled[p]
	for id, o := range u {
		if o.ready && !o.readyAt.After(at) {
			delete(u, id)
			continue
		}
		have := 0
		for _, g := range o.want.observed() {
			have += len(table.ByGID[g])
		}
		if missing := max(o.need-have, 0); missing > 0 {
			held += missing
			starting++
		}
	}
	return held, starting
}
