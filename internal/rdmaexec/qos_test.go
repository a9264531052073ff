package rdmaexec

import (
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// qosArgs are two rails' --net flags with the QoS fields given: one
// subnet, for twoRailsAt's 10.0.1.4 and 10.0.1.5 (a range of their own).
func qosArgs(a, b string) []string {
	return []string{"--net", "name=a,hca=mlx5_0,port=1,subnet=10.0.1.0/24" + a, "--net", "name=b,hca=mlx5_1,port=1,subnet=10.0.1.0/24" + b, "--timeout", "2s"}
}

// The networks' traffic class and service level reach the workload as the
// four variables; one the user set wins, and a different one is said on
// stderr; a network without them exports none.
func TestExecQoSExported(t *testing.T) {
	for _, tt := range []struct {
		name      string
		a, b      string
		user      []string
		want, not []string
		said      string
	}{
		{name: "both rails 106/3", a: ",traffic_class=106,service_level=3", b: ",traffic_class=106,service_level=3",
			want: []string{"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3", "UCX_IB_SL=3"}},
		{name: "zero is a value", a: ",traffic_class=0,service_level=0", b: ",traffic_class=0,service_level=0",
			want: []string{"NCCL_IB_TC=0", "UCX_IB_TRAFFIC_CLASS=0", "NCCL_IB_SL=0", "UCX_IB_SL=0"}},
		{name: "the user's NCCL_IB_TC wins", a: ",traffic_class=106,service_level=3", b: ",traffic_class=106,service_level=3",
			user: []string{"NCCL_IB_TC=96"}, want: []string{"NCCL_IB_TC=96", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3"}, not: []string{"NCCL_IB_TC=106"},
			said: "keeping NCCL_IB_TC=96 from the environment"},
		{name: "no QoS on either network", not: []string{"NCCL_IB_TC", "NCCL_IB_SL", "UCX_IB_TRAFFIC_CLASS", "UCX_IB_SL"}},
		{name: "only the traffic class", a: ",traffic_class=106", b: ",traffic_class=106",
			want: []string{"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106"}, not: []string{"NCCL_IB_SL", "UCX_IB_SL"}},
		{name: "rails differ, the user chose both", a: ",traffic_class=106", b: ",traffic_class=96",
			user: []string{"NCCL_IB_TC=98", "UCX_IB_TRAFFIC_CLASS=98"}, want: []string{"NCCL_IB_TC=98", "UCX_IB_TRAFFIC_CLASS=98"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, sys, env, stderr := twoRailsAt(t, false, "10.0.1.4", "10.0.1.5")
			sys.Environ = append(sys.Environ, tt.user...)
			Main(append(qosArgs(tt.a, tt.b), "--", "true"), sys)
			if *env == nil {
				t.Fatalf("the workload was not started; stderr %s", stderr)
			}
			got := "\n" + strings.Join(*env, "\n") + "\n"
			for _, w := range tt.want {
				if !strings.Contains(got, "\n"+w+"\n") {
					t.Errorf("the workload's environment lacks %s:%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, "\n"+n) {
					t.Errorf("the workload's environment has %s:%s", n, got)
				}
			}
			if tt.said != "" && !strings.Contains(stderr.String(), tt.said) {
				t.Errorf("stderr lacks %q: %s", tt.said, stderr)
			}
		})
	}
}

// Rails whose networks ask for different QoS: status 120 at once (before
// any wait), the workload not started, the networks and values named and
// the way out; a variable the user set for only one library does not
// settle it.
func TestExecQoSConflictRefused(t *testing.T) {
	for _, tt := range []struct {
		name, a, b string
		user       []string
		want       []string
	}{
		{name: "different traffic classes", a: ",traffic_class=106", b: ",traffic_class=96",
			want: []string{"traffic_class differs per network (a 106, b 96), and NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS take one value for every device"}},
		{name: "a class on one rail only", a: ",traffic_class=106,service_level=3", b: ",traffic_class=106",
			want: []string{"service_level differs per network (a 3, b none), and NCCL_IB_SL and UCX_IB_SL take one value"}},
		{name: "the user set NCCL's only", a: ",traffic_class=106", b: ",traffic_class=96", user: []string{"NCCL_IB_TC=106"},
			want: []string{"traffic_class differs per network (a 106, b 96), and UCX_IB_TRAFFIC_CLASS takes one value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, sys, env, stderr := twoRailsAt(t, false, "10.0.1.4", "10.0.1.5")
			sys.Environ = append(sys.Environ, tt.user...)
			sys.Ifaces = func() ([]Iface, error) {
				t.Error("the interfaces were looked at: a conflict is refused before any wait")
				return nil, nil
			}
			code := Main(append(qosArgs(tt.a, tt.b), "--", "true"), sys)
			if code != api.ExitQoSConflict || *env != nil {
				t.Fatalf("status %d (want %d), workload started: %v; stderr %s", code, api.ExitQoSConflict, *env != nil, stderr)
			}
			for _, w := range append(tt.want, "The workload was not started", "-o traffic_class", "-e NCCL_IB_TC=N -e UCX_IB_TRAFFIC_CLASS=N") {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// The QoS fields of --net: FormatNet and parseNet agree, and out-of-range
// values are refused.
func TestNetQoSFields(t *testing.T) {
	tc, sl := 106, 3
	in := Network{Name: "roce", HCA: "mlx5_0", Port: 1, TrafficClass: &tc, ServiceLevel: &sl}
	v := FormatNet(in)
	if v != "name=roce,hca=mlx5_0,port=1,traffic_class=106,service_level=3" {
		t.Fatalf("FormatNet = %q", v)
	}
	out, err := parseNet(v)
	if err != nil || out.TrafficClass == nil || *out.TrafficClass != 106 || out.ServiceLevel == nil || *out.ServiceLevel != 3 {
		t.Fatalf("parseNet(%q) = %+v, %v", v, out, err)
	}
	if v := FormatNet(Network{Name: "roce"}); strings.Contains(v, "traffic_class") || strings.Contains(v, "service_level") {
		t.Fatalf("FormatNet without QoS = %q", v)
	}
	for _, bad := range []string{"name=x,traffic_class=256", "name=x,traffic_class=-1", "name=x,service_level=8", "name=x,service_level=x"} {
		if _, err := parseNet(bad); err == nil {
			t.Errorf("parseNet(%q) accepted", bad)
		}
	}
}
