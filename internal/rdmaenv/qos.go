package rdmaenv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/api"
)

// Names of the QoS variables: the traffic class (the IP ToS byte RoCE v2
// packets carry) and the service level (the 802.1p priority of tagged
// frames) NCCL and UCX give their queue pairs. Each takes one value for
// every device.
const (
	NCCLTrafficClass = "NCCL_IB_TC"
	NCCLServiceLevel = "NCCL_IB_SL"
	UCXTrafficClass  = "UCX_IB_TRAFFIC_CLASS"
	UCXServiceLevel  = "UCX_IB_SL"
)

// QoS is what a container's network asks its workloads to send RoCE with:
// its -o traffic_class and -o service_level; nil when not set.
type QoS struct {
	// Network names the network, for messages.
	Network      string
	TrafficClass *int
	ServiceLevel *int
}

// QoSPlan is the QoS part of a workload's environment.
type QoSPlan struct {
	// Vars are the variables to export; a caller keeps any already set.
	Vars []Var
	// Notes say what the variables leave to the user's own settings.
	Notes []string
	// Conflict is not empty when the networks ask for different values
	// and a library's variable, which takes one value for every device,
	// is not set by the user: one line per option, naming the networks.
	Conflict []string
}

// QoSVars returns the QoS variables of a container on networks nets:
// NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS when every network sets the same
// traffic class, NCCL_IB_SL and UCX_IB_SL when every network sets the same
// service level. An option no network sets exports nothing. When the
// networks differ (one setting none counts as different: its rail would be
// sent on the others' class), nothing is exported for that option, and
// Conflict names the networks unless the user set the variable of every
// library (given): then it is the user's choice, as with the GID index.
func QoSVars(nets []QoS, given Lookup) QoSPlan {
	var plan QoSPlan
	for _, o := range []struct {
		option    string
		nccl, ucx string
		get       func(QoS) *int
	}{
		{api.OptTrafficClass, NCCLTrafficClass, UCXTrafficClass, func(q QoS) *int { return q.TrafficClass }},
		{api.OptServiceLevel, NCCLServiceLevel, UCXServiceLevel, func(q QoS) *int { return q.ServiceLevel }},
	} {
		value, same, any := -1, true, false
		var each []string
		for i, q := range nets {
			p := o.get(q)
			each = append(each, q.Network+" "+optText(p))
			if p != nil {
				any = true
			}
			switch {
			case i == 0 && p != nil:
				value = *p
			case i == 0:
			case p == nil && value >= 0, p != nil && *p != value:
				same = false
			}
		}
		if !any {
			continue
		}
		if same && value >= 0 {
			v := strconv.Itoa(value)
			plan.Vars = append(plan.Vars, Var{o.nccl, v}, Var{o.ucx, v})
			continue
		}
		_, ncclGiven := given.get(o.nccl)
		_, ucxGiven := given.get(o.ucx)
		if ncclGiven && ucxGiven {
			plan.Notes = append(plan.Notes, fmt.Sprintf("the networks ask for different %s (%s): %s and %s as given",
				o.option, strings.Join(each, ", "), o.nccl, o.ucx))
			continue
		}
		var unset []string
		for _, n := range []string{o.nccl, o.ucx} {
			if _, ok := given.get(n); !ok {
				unset = append(unset, n)
			}
		}
		plan.Conflict = append(plan.Conflict, fmt.Sprintf("%s differs per network (%s), and %s take%s one value for every device",
			o.option, strings.Join(each, ", "), strings.Join(unset, " and "), plural1(len(unset))))
	}
	return plan
}

func optText(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}

// plural1 is the verb ending for n subjects: "s" for one.
func plural1(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}
