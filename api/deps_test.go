package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Package api is imported by programs that only read the daemon's status
// (the docker rdma CLI plugin): it uses the standard library only.
func TestStandardLibraryOnly(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists the package's dependencies with go list: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) != 1 || deps[0] != "github.com/rdma-macvlan/rdma-macvlan/api" {
		t.Fatalf("package api depends on more than the standard library: %v", deps)
	}
}
