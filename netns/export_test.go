package netns

import "golang.org/x/sys/unix"

// SendFrame sends frame, an Ethernet frame as is, on the link called link
// in h's namespace.
func (h *Handle) SendFrame(link string, frame []byte) error {
	l, err := h.LinkByName(link)
	if err != nil {
		return err
	}
	f, err := h.packetSocket(l.Index, unix.ETH_P_ARP)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(frame)
	return err
}
