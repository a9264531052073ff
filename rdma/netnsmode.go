package rdma

import (
	"errors"
	"fmt"
	"strings"
)

// RDMA netns modes, as `rdma system show netns` prints them.
const (
	NetnsShared    = "shared"
	NetnsExclusive = "exclusive"
)

// Where NetnsMode found the mode.
const (
	SourceNetlink = "netlink"
	SourceSysfs   = "sysfs"
)

// NetnsModeFromSysfs reads the ib_core module parameter netns_mode under the
// root: "Y" is shared, "N" exclusive. The kernel keeps it in step with the
// live mode (seen on Debian's 6.1 kernel: it reads N after
// `rdma system set netns exclusive`), so it is a faithful fallback when RDMA
// netlink is unavailable.
// Equivalent to: cat /sys/module/ib_core/parameters/netns_mode
func (s *Sysfs) NetnsModeFromSysfs() (string, error) {
	p := s.path("sys/module/ib_core/parameters/netns_mode")
	v, err := readTrimmed(p)
	if err != nil {
		return "", fmt.Errorf("read RDMA netns mode: %w (is ib_core loaded? check: rdma system show netns)", err)
	}
	switch v {
	case "Y", "y", "1":
		return NetnsShared, nil
	case "N", "n", "0":
		return NetnsExclusive, nil
	}
	return "", fmt.Errorf("read RDMA netns mode from %s: unexpected value %q, want Y or N", p, v)
}

// NetnsMode returns the RDMA netns mode ("shared" or "exclusive") and where
// it came from: fromNetlink first (the live value, e.g. a wrapper around
// netlink.RdmaSystemGetNetnsMode), then sysfs when fromNetlink is nil, fails
// or answers something else. The error wraps both causes.
// Equivalent to: rdma system show netns
func NetnsMode(fromNetlink func() (string, error), s *Sysfs) (mode, source string, err error) {
	var nlErr error
	if fromNetlink == nil {
		nlErr = errors.New("RDMA netlink not available")
	} else {
		m, err := fromNetlink()
		switch mode := strings.ToLower(strings.TrimSpace(m)); {
		case err != nil:
			nlErr = err
		case mode == NetnsShared || mode == NetnsExclusive:
			return mode, SourceNetlink, nil
		default:
			nlErr = fmt.Errorf("unexpected netns mode %q", m)
		}
	}
	mode, sysErr := s.NetnsModeFromSysfs()
	if sysErr != nil {
		return "", "", fmt.Errorf("RDMA netns mode: netlink: %w; sysfs: %w", nlErr, sysErr)
	}
	s.log().Debugf("rdma netns mode %s read from sysfs: netlink failed: %v", mode, nlErr)
	return mode, SourceSysfs, nil
}
