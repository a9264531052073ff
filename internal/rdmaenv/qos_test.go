package rdmaenv

import (
	"fmt"
	"strings"
	"testing"
)

func ip(n int) *int { return &n }

// QoSVars: one value for every network is exported to both libraries, no
// value exports nothing, different values export nothing and conflict
// unless the user set both libraries' variable.
func TestQoSVars(t *testing.T) {
	for _, tt := range []struct {
		name     string
		nets     []QoS
		given    map[string]string
		vars     string
		conflict string
	}{
		{name: "one network", nets: []QoS{{"a", ip(106), ip(3)}},
			vars: "NCCL_IB_TC=106 UCX_IB_TRAFFIC_CLASS=106 NCCL_IB_SL=3 UCX_IB_SL=3"},
		{name: "none", nets: []QoS{{"a", nil, nil}, {"b", nil, nil}}},
		{name: "same on two", nets: []QoS{{"a", ip(106), nil}, {"b", ip(106), nil}}, vars: "NCCL_IB_TC=106 UCX_IB_TRAFFIC_CLASS=106"},
		{name: "differ", nets: []QoS{{"a", ip(106), ip(3)}, {"b", ip(96), ip(3)}}, vars: "NCCL_IB_SL=3 UCX_IB_SL=3",
			conflict: "traffic_class differs per network (a 106, b 96), and NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS take one value for every device"},
		{name: "set on the second only", nets: []QoS{{"a", nil, nil}, {"b", nil, ip(0)}},
			conflict: "service_level differs per network (a none, b 0)"},
		{name: "set on the first only", nets: []QoS{{"a", nil, ip(5)}, {"b", nil, nil}},
			conflict: "service_level differs per network (a 5, b none)"},
		{name: "differ, the user chose", nets: []QoS{{"a", ip(106), nil}, {"b", ip(96), nil}},
			given: map[string]string{"NCCL_IB_TC": "1", "UCX_IB_TRAFFIC_CLASS": "1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := QoSVars(tt.nets, func(n string) (string, bool) { v, ok := tt.given[n]; return v, ok })
			var vars []string
			for _, v := range p.Vars {
				vars = append(vars, v.String())
			}
			if got := strings.Join(vars, " "); got != tt.vars {
				t.Errorf("vars %q, want %q", got, tt.vars)
			}
			got := strings.Join(p.Conflict, "; ")
			if tt.conflict == "" && got != "" || !strings.Contains(got, tt.conflict) {
				t.Errorf("conflict %q, want %q", got, tt.conflict)
			}
		})
	}
}

// Vars adds the ports' QoS after the device and GID variables.
func TestVarsWithQoS(t *testing.T) {
	ports := []Port{{HCA: "mlx5_0", Port: 1, Ifname: "eth0", Index: 3, QoS: QoS{"a", ip(106), ip(3)}}}
	plan := Vars(ports, DefaultChoice, nil)
	got := fmt.Sprint(plan.Vars)
	for _, w := range []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3", "UCX_IB_SL=3"} {
		if !strings.Contains(got, w) {
			t.Errorf("Vars %s lacks %s", got, w)
		}
	}
	ports = append(ports, Port{HCA: "mlx5_1", Port: 1, Ifname: "eth1", Index: 3, QoS: QoS{"b", ip(96), ip(3)}})
	if plan := Vars(ports, DefaultChoice, nil); len(plan.QoSConflict) != 1 || strings.Contains(fmt.Sprint(plan.Vars), "_TC=") {
		t.Errorf("two rails with different classes: vars %v, conflict %v", plan.Vars, plan.QoSConflict)
	}
}
