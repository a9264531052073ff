package rdmatest

import "testing"

// MLX5 builds an mlx5 host (see BuildMLX5) in a new t.TempDir and returns
// its root.
func MLX5(t testing.TB, o MLX5Options) string {
	t.Helper()
	root := t.TempDir()
	if err := BuildMLX5(root, o); err != nil {
		t.Fatalf("build mlx5 fixture: %v", err)
	}
	return root
}

// RXE builds a Soft-RoCE host (see BuildRXE) in a new t.TempDir and returns
// its root.
func RXE(t testing.TB, o RXEOptions) string {
	t.Helper()
	root := t.TempDir()
	if err := BuildRXE(root, o); err != nil {
		t.Fatalf("build rxe fixture: %v", err)
	}
	return root
}
