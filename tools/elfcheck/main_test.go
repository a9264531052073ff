package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build compiles a small program for linux/goarch with the given cgo
// setting and returns its path.
func build(t *testing.T, goarch, cgo string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os/user\"\n\nfunc main() { _, _ = user.Current() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, extra...), src)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED="+cgo, "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		if cgo == "1" {
			t.Skipf("no cgo toolchain to build a dynamic binary (%v): %s", err, out)
		}
		t.Fatalf("go build %s: %v\n%s", goarch, err, out)
	}
	return bin
}

func TestCheck(t *testing.T) {
	amd64 := build(t, "amd64", "0")
	arm64 := build(t, "arm64", "0")
	if err := check(amd64, "amd64"); err != nil {
		t.Errorf("static amd64 binary: %v", err)
	}
	if err := check(arm64, "arm64"); err != nil {
		t.Errorf("static arm64 binary: %v", err)
	}
	if err := check(arm64, "amd64"); err == nil || !strings.Contains(err.Error(), "EM_AARCH64") {
		t.Errorf("arm64 binary checked as amd64: %v", err)
	}
	if err := check(amd64, "arm64"); err == nil || !strings.Contains(err.Error(), "EM_X86_64") {
		t.Errorf("amd64 binary checked as arm64: %v", err)
	}
	t.Run("dynamic", func(t *testing.T) {
		// os/user with cgo links libc dynamically.
		dyn := build(t, "amd64", "1")
		if err := check(dyn, "amd64"); err == nil || !strings.Contains(err.Error(), "dynamic") {
			t.Errorf("dynamic binary: %v", err)
		}
	})
	if err := check(filepath.Join(t.TempDir(), "missing"), "amd64"); err == nil {
		t.Error("a missing file passed")
	}
}
