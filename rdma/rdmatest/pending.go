package rdmatest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The kernel's side of a RoCE GID table that sysfs does not show.
//
// Reserved default slots. When a RoCE port's table is set up, the kernel
// reserves its first slots for the default GIDs, one per RoCE type the port
// supports (two on mlx5, one on rxe). An address's entry never goes there,
// even when a default slot is empty: the search for a free slot only takes
// a slot whose "default" mark matches what is being added.
//
// Pending delete. Deleting an entry marks it pending-delete and drops the
// table's own reference; while anything else still holds a reference (a QP
// whose address vector uses it, an address handle, an rdma_cm ID), the
// entry stays in its slot. Readers see nothing of it: gids/<i> reads the
// zero GID and the attributes fail, exactly as for an empty slot. Yet the
// search for a free slot skips it, since the slot is not empty to the
// kernel. The slot is freed when the last reference goes (the process
// closes its QPs), with no change visible in sysfs.
//
// Both are kept in dot files of the port directory, one name a line:
// defaultsFile holds the default types in slot order, pendingFile the
// pending-delete slots.
const (
	defaultsFile = ".rdmatest-defaults"
	pendingFile  = ".rdmatest-pending"
)

// writePortMeta records a port's default types and pending-delete slots.
func writePortMeta(root, portDir string, types []string, pending []int) error {
	if types != nil {
		if err := writeFileAtomic(root, filepath.Join(portDir, defaultsFile), strings.Join(types, "\n")); err != nil {
			return err
		}
	}
	return writePending(root, portDir, pending)
}

// readPortMeta returns a port's default types (nil when not recorded) and
// its pending-delete slots.
func readPortMeta(root, portDir string) (types []string, pending map[int]bool, err error) {
	b, err := os.ReadFile(filepath.Join(root, portDir, defaultsFile))
	switch {
	case err == nil:
		types = []string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				types = append(types, l)
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	}
	pending, err = readPending(root, portDir)
	return types, pending, err
}

func readPending(root, portDir string) (map[int]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, portDir, pendingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return map[int]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, f := range strings.Fields(string(b)) {
		i, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %q is not a slot", pendingFile, portDir, f)
		}
		out[i] = true
	}
	return out, nil
}

func writePending(root, portDir string, pending []int) error {
	p := filepath.Join(root, portDir, pendingFile)
	if len(pending) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	s := slices.Sorted(slices.Values(pending))
	lines := make([]string, len(s))
	for i, v := range s {
		lines[i] = strconv.Itoa(v)
	}
	return writeFileAtomic(root, filepath.Join(portDir, pendingFile), strings.Join(lines, "\n"))
}

func pendingList(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for i := range m {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// dropPending frees slot index of a pending delete, if it had one.
func dropPending(root, portDir string, index int) error {
	pending, err := readPending(root, portDir)
	if err != nil || !pending[index] {
		return err
	}
	delete(pending, index)
	return writePending(root, portDir, pendingList(pending))
}

// RemoveAddressHeld simulates the kernel removing an IP address whose
// entries a QP still uses (a container disconnected while its workload
// runs): every entry holding its GID reads empty at once, but its slot
// stays taken until ReleasePending. It returns the indices emptied.
func RemoveAddressHeld(root, hca string, port int, ip string) ([]int, error) {
	dir, held, err := entriesOf(root, hca, port, ip)
	if err != nil {
		return nil, err
	}
	return held, holdSlots(root, dir, held)
}

// PendingDelete simulates the delete of the entries in slots indices while
// a QP holds them: they read empty and stay taken until ReleasePending.
func PendingDelete(root, hca string, port int, indices ...int) error {
	dir, err := portDir(root, hca, port)
	if err != nil {
		return err
	}
	types, _, err := readPortMeta(root, dir)
	if err != nil {
		return err
	}
	for _, i := range indices {
		if err := checkSlot(root, dir, i); err != nil {
			return err
		}
		if i < len(types) {
			return fmt.Errorf("slot %d of %s/%d is a reserved default slot: a pending delete of it would never matter to an address's entry", i, hca, port)
		}
	}
	return holdSlots(root, dir, indices)
}

// holdSlots empties the slots and records them as pending delete.
func holdSlots(root, dir string, indices []int) error {
	pending, err := readPending(root, dir)
	if err != nil {
		return err
	}
	for _, i := range indices {
		// Recorded first: a reader that sees the slot empty must not
		// find it free in the fake kernel's eyes.
		pending[i] = true
	}
	if err := writePending(root, dir, pendingList(pending)); err != nil {
		return err
	}
	for _, i := range indices {
		if err := clearEntry(root, dir, i); err != nil {
			return err
		}
	}
	return nil
}

// ReleasePending simulates the last holder of pending-delete entries
// letting go (the process closes its QPs): slots indices, or every
// pending-delete slot of the port when none is given, become free. Nothing
// changes in sysfs. It returns the slots freed.
func ReleasePending(root, hca string, port int, indices ...int) ([]int, error) {
	dir, err := portDir(root, hca, port)
	if err != nil {
		return nil, err
	}
	pending, err := readPending(root, dir)
	if err != nil {
		return nil, err
	}
	if len(indices) == 0 {
		indices = pendingList(pending)
	}
	var freed []int
	for _, i := range indices {
		if !pending[i] {
			return freed, fmt.Errorf("slot %d of %s/%d has no pending delete (pending: %v)", i, hca, port, pendingList(pending))
		}
		delete(pending, i)
		freed = append(freed, i)
	}
	return freed, writePending(root, dir, pendingList(pending))
}

// Pending lists the pending-delete slots of a port: what the kernel holds
// and sysfs does not show.
func Pending(root, hca string, port int) ([]int, error) {
	dir, err := portDir(root, hca, port)
	if err != nil {
		return nil, err
	}
	pending, err := readPending(root, dir)
	if err != nil {
		return nil, err
	}
	return pendingList(pending), nil
}
