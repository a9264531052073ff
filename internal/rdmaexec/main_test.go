package rdmaexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/rdma/rdmatest"
)

// The test binary doubles as rdma-exec (RDMAEXEC_TEST_ROLE=helper) and as
// a workload (RDMAEXEC_TEST_ROLE=workload: prints its pid, arguments and
// environment, then exits with the status in its first argument). With
// RDMAEXEC_TEST_LOOK set, the helper's first listing of interfaces writes
// a byte to file descriptor 3 (it is waiting, its signal handlers set), and
// with RDMAEXEC_TEST_LOOK=hang it then reads its stdin to the end, a read
// that does not return while the test holds the pipe open.
func TestMain(m *testing.M) {
	switch os.Getenv("RDMAEXEC_TEST_ROLE") {
	case "helper":
		os.Setenv("RDMAEXEC_TEST_ROLE", "workload")
		sys := System()
		sys.Environ = os.Environ()
		if look := os.Getenv("RDMAEXEC_TEST_LOOK"); look != "" {
			ready, list := os.NewFile(3, "ready"), sys.Ifaces
			sys.Ifaces = func() ([]Iface, error) {
				if ready != nil {
					ready.Write([]byte{1})
					ready.Close()
					ready = nil
					if look == "hang" {
						io.ReadAll(os.Stdin)
					}
				}
				return list()
			}
		}
		os.Exit(Main(os.Args[1:], sys))
	case "workload":
		fmt.Printf("pid=%d\n", os.Getpid())
		for i, a := range os.Args[1:] {
			fmt.Printf("arg%d=%s\n", i, a)
		}
		for _, e := range os.Environ() {
			fmt.Printf("env %s\n", e)
		}
		code, _ := strconv.Atoi(os.Args[1])
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runHelper starts the test binary as rdma-exec with args and extra
// environment; it returns the process, its stdout and stderr buffers.
func runHelper(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = append(append(os.Environ(), "RDMAEXEC_TEST_ROLE=helper"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &stdout, &stderr
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// The helper finds lo's 127.0.0.1 entry in a fake table (the test's own
// namespace has lo as every container has), exports its index, and
// becomes the workload: same pid, arguments untouched, its exit status.
func TestExecReal(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	rdmatest.AddAddress(root, "mlx5_0", 1, "127.0.0.9", "eth0")
	rdmatest.AddAddress(root, "mlx5_0", 1, "127.0.0.1", "lo")
	cmd, stdout, stderr := runHelper(t, []string{api.EnvExecSysfsRoot + "=" + root, "UCX_IB_GID_INDEX=9"},
		"--net", "name=roce,hca=mlx5_0,port=1,subnet=127.0.0.0/8", "--timeout", "5s", "--", self(t), "7", "a b", "", "--net", "-x")
	code := exitCode(t, cmd)
	out := stdout.String()
	if code != 7 {
		t.Fatalf("status %d, want 7; stdout %s stderr %s", code, out, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("pid=%d\n", cmd.Process.Pid),
		"arg0=7\narg1=a b\narg2=\narg3=--net\narg4=-x\n",
		"env NCCL_IB_GID_INDEX=5\n", "env NCCL_IB_HCA==mlx5_0:1\n", "env NCCL_SOCKET_IFNAME==lo\n",
		"env UCX_NET_DEVICES=mlx5_0:1\n", "env UCX_IB_GID_INDEX=9\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("workload output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, api.EnvExecSysfsRoot) {
		t.Errorf("the workload sees %s:\n%s", api.EnvExecSysfsRoot, out)
	}
	if !strings.Contains(stderr.String(), "keeping UCX_IB_GID_INDEX=9 from the environment (this container's own: 5)") {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestExecNotReadyNeverStartsWorkload(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{TableSize: 4})
	rdmatest.AddAddress(root, "mlx5_0", 1, "127.0.0.9", "eth0")
	cmd, stdout, stderr := runHelper(t, []string{api.EnvExecSysfsRoot + "=" + root},
		"--net", "name=roce,hca=mlx5_0,port=1,subnet=127.0.0.0/8", "--timeout", "300ms", "--", self(t), "0")
	if code := exitCode(t, cmd); code != api.ExitNotReady {
		t.Fatalf("status %d, want %d; stderr %s", code, api.ExitNotReady, stderr)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "the table is full (4 of 4 entries used") {
		t.Fatalf("stdout %q stderr %q", stdout, stderr)
	}
}

func TestExecSignalWhileWaiting(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd := exec.Command(self(t), "--net", "name=roce,hca=mlx5_0,port=1,subnet=127.0.0.0/8", "--timeout", "1m", "--", self(t), "0")
	cmd.Env = append(os.Environ(), "RDMAEXEC_TEST_ROLE=helper", "RDMAEXEC_TEST_LOOK=ready", api.EnvExecSysfsRoot+"="+root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = &stdout, &stderr, []*os.File{readyW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Signalled once it is waiting, its handlers set: a signal before that
	// would meet the default action, and prove nothing of rdma-exec's.
	if _, err := readyR.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the helper did not start waiting: %v; stderr %s", err, &stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %d, want 143; stderr %s", code, &stderr)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "terminated while waiting") {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

// SIGTERM (docker stop) or SIGINT ends rdma-exec at once, with 128 plus
// the signal's number as --help says, while its look at the tables meets a
// FIFO or a read that does not return; the workload is not started.
func TestExecSignalEndsAStuckWait(t *testing.T) {
	for _, tc := range []struct {
		name, look string
		fifo       bool
		sig        syscall.Signal
		msg        string
	}{
		{"FIFO in the table", "ready", true, syscall.SIGTERM, "terminated while waiting"},
		{"read that does not return", "hang", false, syscall.SIGTERM, "terminated while waiting"},
		{"read that does not return, SIGINT", "hang", false, syscall.SIGINT, "interrupt while waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
			if tc.fifo {
				replaceWith(t, root, "gids/200", "")
			}
			readyR, readyW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			stdinR, stdinW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer readyR.Close()
			cmd := exec.Command(self(t), "--net", "name=roce,hca=mlx5_0,port=1,subnet=127.0.0.0/8", "--timeout", "1m", "--", self(t), "0")
			cmd.Env = append(os.Environ(), "RDMAEXEC_TEST_ROLE=helper", "RDMAEXEC_TEST_LOOK="+tc.look, api.EnvExecSysfsRoot+"="+root)
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = stdinR, &stdout, &stderr, []*os.File{readyW}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			readyW.Close()
			stdinR.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				stdinW.Close()
			})

			readyR.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := readyR.Read(make([]byte, 1)); err != nil {
				t.Fatalf("rdma-exec did not start waiting: %v; stderr %s", err, &stderr)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err = <-exited:
				exited <- err
			case <-time.After(10 * time.Second):
				t.Fatalf("rdma-exec still runs 10s after %v; stderr %s", tc.sig, &stderr)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(tc.sig) {
				t.Fatalf("rdma-exec ended with %v, want status %d; stderr %s", err, 128+int(tc.sig), &stderr)
			}
			if stdout.Len() != 0 || !strings.Contains(stderr.String(), tc.msg+" for the container's GID entries: the workload was not started") {
				t.Fatalf("stdout %q stderr %q", &stdout, &stderr)
			}
		})
	}
	for _, want := range []string{"128+N when signal N", "143 for SIGTERM", "130 for SIGINT"} {
		if !strings.Contains(Usage, want) {
			t.Errorf("--help does not say %q:\n%s", want, Usage)
		}
	}
}

func TestExecErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--", "no-such-program-rdmaexec"}, api.ExitNotFound, "executable file not found"},
		{[]string{"--", "/no/such/file"}, api.ExitNotFound, "no such file"},
		{[]string{"--", "/"}, api.ExitCannotExec, "exec /"},
		{[]string{"--roce-version", "3", "--", "true"}, api.ExitUsage, "--roce-version"},
		{[]string{"--net", "name=x,port=a", "--", "true"}, api.ExitUsage, "not a port number"},
		{[]string{}, api.ExitUsage, "no COMMAND"},
	} {
		cmd, _, stderr := runHelper(t, nil, tc.args...)
		if code := exitCode(t, cmd); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%q: status %d, stderr %q; want %d, %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

// With RDMA_EXEC_TIMING=1 the helper says how long it waited and how many
// looks that took (the entry appears only 300 ms after the helper was
// started, so its first look finds nothing: a second look comes a poll
// interval, 100 ms, later at the earliest; its own clock starts after its
// start-up, which a loaded machine can stretch, so the wait itself may be
// under 300 ms), and the workload does not see the variable. Without it,
// nothing is said.
func TestExecReportsWait(t *testing.T) {
	root := rdmatest.MLX5(t, rdmatest.MLX5Options{})
	args := []string{"--net", "name=roce,hca=mlx5_0,port=1,subnet=127.0.0.0/8", "--timeout", "20s", "--", self(t), "0"}
	cmd, stdout, stderr := runHelper(t, []string{api.EnvExecSysfsRoot + "=" + root, api.EnvExecTiming + "=1"}, args...)
	time.Sleep(300 * time.Millisecond)
	if _, err := rdmatest.AddAddress(root, "mlx5_0", 1, "127.0.0.1", "lo"); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("status %d; stderr %s", code, stderr)
	}
	var ms float64
	var looks int
	var unit string
	line := strings.TrimSpace(stderr.String())
	if n, err := fmt.Sscanf(line, "rdma-exec: GID entries ready after %f ms (%d %s", &ms, &looks, &unit); n != 3 || err != nil {
		t.Fatalf("stderr %q: no wait reported (%v)", line, err)
	}
	if ms < 100 || looks < 2 || unit != "looks)" {
		t.Errorf("stderr %q: the entry appeared 300 ms after the start, so the wait took more than one look, a poll interval (100 ms) apart", line)
	}
	if strings.Contains(stdout.String(), api.EnvExecTiming) {
		t.Errorf("the workload sees %s:\n%s", api.EnvExecTiming, stdout)
	}

	cmd, _, stderr = runHelper(t, []string{api.EnvExecSysfsRoot + "=" + root}, args...)
	if code := exitCode(t, cmd); code != 0 || strings.Contains(stderr.String(), "ready after") {
		t.Fatalf("without %s: status %d, stderr %q; want 0 and no report", api.EnvExecTiming, code, stderr)
	}
	cmd, _, stderr = runHelper(t, []string{api.EnvExecSysfsRoot + "=" + root, api.EnvExecTiming + "=1"}, args...)
	if code := exitCode(t, cmd); code != 0 || !strings.Contains(stderr.String(), "ready after ") || !strings.HasSuffix(stderr.String(), " (1 look)\n") {
		t.Fatalf("entry already there: status %d, stderr %q; want 0 and one look reported", code, stderr)
	}
}

// twoRails is a tree with mlx5_0 and mlx5_1 and a container on both, eth0
// 10.0.1.5 on mlx5_0 and eth1 10.0.2.5 on mlx5_1, whose own entries have
// different indexes: on mlx5_0 another container's link-local pair came
// first. hostIPv4 gives each parent an address in its rail's subnet.
func twoRails(t *testing.T, hostIPv4 bool) (root string, sys *Sys, execed *[]string, stderr *bytes.Buffer) {
	t.Helper()
	return twoRailsAt(t, hostIPv4, "10.0.1.5", "10.0.2.5")
}

// twoRailsAt is twoRails with the container's addresses ip0 (eth0, on
// mlx5_0) and ip1 (eth1, on mlx5_1), each in a /24.
func twoRailsAt(t *testing.T, hostIPv4 bool, ip0, ip1 string) (root string, sys *Sys, execed *[]string, stderr *bytes.Buffer) {
	t.Helper()
	root = t.TempDir()
	for i, hca := range []string{"mlx5_0", "mlx5_1"} {
		o := rdmatest.MLX5Options{HCA: hca, Netdev: fmt.Sprintf("ens%d", i), MAC: fmt.Sprintf("02:00:00:00:00:0%d", i+1),
			PCIAddr: fmt.Sprintf("0000:0%d:00.0", i+3), Uverbs: i}
		if hostIPv4 {
			o.HostIPv4 = fmt.Sprintf("10.0.%d.1", i+1)
		}
		if err := rdmatest.BuildMLX5(root, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []struct{ hca, ip, ndev string }{
		{"mlx5_0", "fe80::1:2", "eth0"}, {"mlx5_0", ip0, "eth0"}, {"mlx5_1", ip1, "eth1"},
	} {
		if _, err := rdmatest.AddAddress(root, a.hca, 1, a.ip, a.ndev); err != nil {
			t.Fatal(err)
		}
	}
	stderr = &bytes.Buffer{}
	execed = new([]string)
	sys = &Sys{
		Stderr:  stderr,
		Environ: []string{api.EnvExecSysfsRoot + "=" + root, "PATH=/bin:/usr/bin"},
		Ifaces:  ifaces(lo, iface("eth0", ip0+"/24"), iface("eth1", ip1+"/24")),
		Exec: func(argv0 string, argv, env []string) error {
			*execed = env
			return errors.New("exec stopped by the test")
		},
	}
	return root, sys, execed, stderr
}

var twoRailArgs = []string{"--net", "name=a,hca=mlx5_0,port=1,subnet=10.0.1.0/24", "--net", "name=b,hca=mlx5_1,port=1,subnet=10.0.2.0/24", "--timeout", "2s"}

// oneSubnetArgs are two rails in one subnet, where the container's
// addresses 10.0.1.4 and 10.0.1.5 make a range of their own (10.0.1.4/31).
var oneSubnetArgs = []string{"--net", "name=a,hca=mlx5_0,port=1,subnet=10.0.1.0/24", "--net", "name=b,hca=mlx5_1,port=1,subnet=10.0.1.0/24", "--timeout", "2s"}

// Indexes that differ per rail with nothing lower in the way: NCCL is
// given a range that takes each rail's own entry and holds no other
// address of the subnet, UCX no index (its own choice is right), and the
// workload starts.
func TestExecDifferentIndexesFoundSetting(t *testing.T) {
	_, sys, env, stderr := twoRailsAt(t, false, "10.0.1.4", "10.0.1.5")
	Main(append(append([]string{}, oneSubnetArgs...), "--", "true"), sys)
	got := strings.Join(*env, "\n")
	for _, want := range []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "NCCL_IB_ADDR_RANGE=10.0.1.4/31", "NCCL_IB_ROCE_VERSION_NUM=2",
		"NCCL_IB_ADDR_FAMILY=AF_INET", "NCCL_SOCKET_IFNAME==eth0,eth1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1"} {
		if !strings.Contains(got+"\n", want+"\n") {
			t.Errorf("the workload's environment lacks %s:\n%s\nstderr: %s", want, got, stderr)
		}
	}
	if strings.Contains(got, "GID_INDEX") {
		t.Errorf("one GID index set for two rails with different indexes:\n%s", got)
	}
}

// Rails in two subnets: the only range that takes both entries today
// (10.0.0.0/22) holds every neighbour of both rails, and NCCL picks a GID
// on every connection: status 121, naming a neighbour's address.
func TestExecDifferentIndexesNoRangeOfItsOwn(t *testing.T) {
	_, sys, env, stderr := twoRails(t, false)
	code := Main(append(append([]string{}, twoRailArgs...), "--", "true"), sys)
	if code != api.ExitGIDMismatch || *env != nil {
		t.Fatalf("status %d (want %d), workload started: %v; stderr %s", code, api.ExitGIDMismatch, *env != nil, stderr)
	}
	if msg := stderr.String(); !strings.Contains(msg, "has no NCCL_IB_ADDR_RANGE holding this container's addresses and no other one: 10.0.0.0/22 also holds 10.0.1.0, an address of subnet 10.0.1.0/24") ||
		strings.Contains(msg, "UCX: ") {
		t.Errorf("stderr: %s", msg)
	}
}

// With the host's own address in each rail's subnet below the container's
// entries, no setting makes NCCL take them (UCX takes them within
// UCX_IB_ROCE_SUBNETS): status 121, the workload not started, the rails,
// indexes and the option named; with --accept-gid-mismatch it starts, with
// a warning, and UCX is set.
func TestExecDifferentIndexesRefused(t *testing.T) {
	_, sys, env, stderr := twoRails(t, true)
	code := Main(append(append([]string{}, twoRailArgs...), "--", "true"), sys)
	if code != api.ExitGIDMismatch || *env != nil {
		t.Fatalf("status %d (want %d), workload started: %v; stderr %s", code, api.ExitGIDMismatch, *env != nil, stderr)
	}
	msg := stderr.String()
	for _, want := range []string{
		"different indexes on its rails mlx5_0:1 (eth0 10.0.1.5, index 7), mlx5_1:1 (eth1 10.0.2.5, index 5)",
		"NCCL: NCCL_IB_GID_INDEX takes one index for every device",
		"10.0.0.0/22 also holds 10.0.1.0",
		"The workload was not started", "docker rdma run --accept-gid-mismatch",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}

	_, sys, env, stderr = twoRails(t, true)
	Main(append(append([]string{"--accept-gid-mismatch"}, twoRailArgs...), "--", "true"), sys)
	if *env == nil || !strings.Contains(stderr.String(), "warning: --accept-gid-mismatch given") {
		t.Fatalf("--accept-gid-mismatch: workload started %v; stderr %s", *env != nil, stderr)
	}
	if got := strings.Join(*env, "\n") + "\n"; !strings.Contains(got, "UCX_IB_ROCE_SUBNETS=10.0.1.5/32,10.0.2.5/32\n") || strings.Contains(got, "UCX_IB_GID_INDEX") {
		t.Errorf("--accept-gid-mismatch: UCX is not set to the container's own entries:\n%s", got)
	}
}
