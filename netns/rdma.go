package netns

import "fmt"

// RdmaNetnsMode reports the RDMA subsystem's network namespace mode, "shared"
// or "exclusive", from RDMA netlink.
// Equivalent to: rdma system show netns
func (h *Handle) RdmaNetnsMode() (string, error) {
	mode, err := h.nl.RdmaSystemGetNetnsMode()
	if err != nil {
		return "", fmt.Errorf("rdma netlink: get netns mode: %w", err)
	}
	return mode, nil
}
