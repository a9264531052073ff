package rdmatest

import (
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// A deleted entry that a QP still holds reads empty, like a free slot, yet
// the fake kernel passes over its slot until the holder lets go.
func TestPendingDeleteSlotReadsEmptyButIsNotFree(t *testing.T) {
	root := MLX5(t, MLX5Options{TableSize: 6})
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	if _, err := AddAddress(root, "mlx5_0", 1, "10.0.0.2", "eth0"); err != nil {
		t.Fatal(err)
	}
	held, err := RemoveAddressHeld(root, "mlx5_0", 1, "10.0.0.2")
	if err != nil || !reflect.DeepEqual(held, []int{2, 3}) {
		t.Fatalf("held %v, %v; want [2 3]", held, err)
	}
	for _, i := range held {
		n := strconv.Itoa(i)
		got := [3]string{readFile(t, filepath.Join(port, "gids", n)), readFile(t, filepath.Join(port, "gid_attrs/types", n)),
			readFile(t, filepath.Join(port, "gid_attrs/ndevs", n))}
		if got != [3]string{ZeroGID, "", ""} {
			t.Errorf("pending-delete slot %d reads %q, want what an empty slot reads", i, got)
		}
	}
	// 4 slots read empty (2-5), two of them are held: one pair fits.
	if idx, err := AddAddress(root, "mlx5_0", 1, "10.0.0.3", "eth0"); err != nil || !reflect.DeepEqual(idx, []int{4, 5}) {
		t.Fatalf("add past the held slots: %v, %v; want [4 5]", idx, err)
	}
	if idx, err := AddAddress(root, "mlx5_0", 1, "10.0.0.4", "eth0"); !errors.Is(err, ErrTableFull) || idx != nil {
		t.Fatalf("add into held slots: %v, %v; want the table full", idx, err)
	}
	freed, err := ReleasePending(root, "mlx5_0", 1)
	if err != nil || !reflect.DeepEqual(freed, []int{2, 3}) {
		t.Fatalf("released %v, %v", freed, err)
	}
	if idx, err := AddAddress(root, "mlx5_0", 1, "10.0.0.4", "eth0"); err != nil || !reflect.DeepEqual(idx, []int{2, 3}) {
		t.Fatalf("add after the release: %v, %v; want [2 3]", idx, err)
	}
	if p, err := Pending(root, "mlx5_0", 1); err != nil || len(p) != 0 {
		t.Fatalf("pending after the release: %v, %v", p, err)
	}
}

// The reserved default slots never take an address's entry, even empty;
// building and marking slots checks what it is given.
func TestReservedAndPendingSlotsAtBuild(t *testing.T) {
	root := MLX5(t, MLX5Options{TableSize: 6, PendingDelete: []int{2}})
	for _, i := range []int{0, 1} {
		if err := ClearGID(root, "mlx5_0", 1, i); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := AddAddress(root, "mlx5_0", 1, "10.0.0.2", "eth0")
	if err != nil || !reflect.DeepEqual(idx, []int{3, 4}) {
		t.Fatalf("add with empty default slots and 2 held: %v, %v; want [3 4]", idx, err)
	}
	if idx, err := AddAddress(root, "mlx5_0", 1, "10.0.0.3", "eth0"); !errors.Is(err, ErrTableFull) || !reflect.DeepEqual(idx, []int{5}) {
		t.Fatalf("add with one free slot: %v, %v; want v1 at 5, then full", idx, err)
	}
	rxe := RXE(t, RXEOptions{TableSize: 4})
	if err := ClearGID(rxe, "rxe0", 1, 0); err != nil {
		t.Fatal(err)
	}
	if idx, err := AddAddress(rxe, "rxe0", 1, "10.0.0.2", "eth0"); err != nil || !reflect.DeepEqual(idx, []int{1}) {
		t.Fatalf("rxe add with an empty default slot: %v, %v; want [1]", idx, err)
	}
	for _, bad := range []MLX5Options{{TableSize: 6, PendingDelete: []int{1}}, {TableSize: 6, PendingDelete: []int{6}},
		{TableSize: 6, PendingDelete: []int{2}, Extra: Pair(2, IPv4GID("10.0.0.9"), "eth0")}} {
		if err := BuildMLX5(t.TempDir(), bad); err == nil {
			t.Errorf("built pending-delete slots %v over a table of 6 with defaults and entries %v", bad.PendingDelete, bad.Extra)
		}
	}
	if err := PendingDelete(root, "mlx5_0", 1, 0); err == nil {
		t.Error("marked a reserved default slot pending delete")
	}
	if _, err := ReleasePending(root, "mlx5_0", 1, 3); err == nil {
		t.Error("released a slot that has no pending delete")
	}
	// A slot the kernel empties with no holder is free again.
	if err := ClearGID(root, "mlx5_0", 1, 2); err != nil {
		t.Fatal(err)
	}
	if p, _ := Pending(root, "mlx5_0", 1); len(p) != 0 {
		t.Errorf("ClearGID left the slot pending: %v", p)
	}
}
