package fabric

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ECN is the RoCE congestion notification state per priority, where the
// driver exposes it in sysfs: NVIDIA's MLNX_OFED mlx5 driver has
// /sys/class/net/IFNAME/ecn/roce_np/enable/PRIO (the notification point,
// marking CNPs back to senders) and roce_rp/enable/PRIO (the reaction point,
// slowing down on CNPs). The upstream kernel has no such files.
type ECN struct {
	// NP and RP are nil when the driver does not expose that side.
	NP *[Priorities]bool `json:"np,omitempty"`
	RP *[Priorities]bool `json:"rp,omitempty"`
}

// ReadECN reads the ECN switches of netdev under the sysfs root; nil when
// the driver exposes none.
func ReadECN(root, netdev string) (*ECN, error) {
	base := filepath.Join(root, "sys/class/net", netdev, "ecn")
	var e ECN
	for _, side := range []struct {
		dir string
		dst **[Priorities]bool
	}{{"roce_np", &e.NP}, {"roce_rp", &e.RP}} {
		var on [Priorities]bool
		found := false
		for p := range Priorities {
			b, err := os.ReadFile(filepath.Join(base, side.dir, "enable", strconv.Itoa(p)))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			found = true
			on[p] = strings.TrimSpace(string(b)) == "1"
		}
		if found {
			*side.dst = &on
		}
	}
	if e.NP == nil && e.RP == nil {
		return nil, nil
	}
	return &e, nil
}
