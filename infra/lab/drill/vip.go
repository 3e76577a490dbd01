package drill

import (
	"slices"
	"strings"
	"time"
)

// Sample is one look at the endpoint or at the VIP's holders.
type Sample struct {
	At time.Duration `json:"at"`
	// Answers: /readyz through the endpoint answered (endpoint samples).
	Answers bool `json:"answers,omitempty"`
	// Holders: the nodes with the VIP on an interface (holder samples).
	Holders []string `json:"holders,omitempty"`
}

// Split is a stretch of holder samples in which two or more nodes held
// the VIP at once.
type Split struct {
	From    time.Duration `json:"from"`
	To      time.Duration `json:"to"`
	Holders []string      `json:"holders"`
	// Handover: shorter than one advert interval, the overlap VRRP
	// preemption itself makes (the new master adds the VIP, the old one
	// drops it when the new master's first advert reaches it), not a split
	// brain.
	Handover bool `json:"handover,omitempty"`
}

// Handback is what the VIP did once the failed nodes were back.
type Handback struct {
	// From held the VIP when recovery began; To holds it at the end.
	From string `json:"from"`
	To   string `json:"to"`
	// At is when To took the VIP, after the recovery began (0: no move).
	At time.Duration `json:"at,omitempty"`
	// Gap is how long the endpoint did not answer around that move.
	Gap time.Duration `json:"gap"`
}

// failover reads the endpoint's samples in [from, until): when it first
// stopped answering, and when it answered again for good (a run of
// answers lasting backForGood, or still going when the window closed).
// 0, 0 when it never stopped; back -1 when it was not back in time.
func failover(endpoint []Sample, from, until time.Duration) (down, back time.Duration) {
	down, back = -1, -1
	for _, s := range endpoint {
		if s.At < from || s.At >= until {
			continue
		}
		switch {
		case !s.Answers:
			if down < 0 {
				down = s.At
			}
			back = -1
		case down >= 0 && back < 0:
			back = s.At
		}
		if back >= 0 && s.At-back >= backForGood {
			return down, back
		}
	}
	if down < 0 {
		return 0, 0
	}
	return down, back
}

// backForGood is how long the endpoint must answer without a failure to
// count as back: an apiserver that loses its etcd quorum answers a probe
// or two on its cached health before it fails for good.
const backForGood = 2 * time.Second

// vipMoved is when, before until, a node other than the holder before
// the failure first had the VIP: keepalived's own failover, whether or
// not the endpoint stopped answering meanwhile; -1 when none did.
func vipMoved(holders []Sample, before string, until time.Duration) time.Duration {
	for _, s := range holders {
		if s.At < 0 || s.At >= until {
			continue
		}
		for _, h := range s.Holders {
			if h != before {
				return s.At
			}
		}
	}
	return -1
}

// splits finds every stretch of samples with more than one holder; one
// shorter than advert is a handover.
func splits(holders []Sample, advert time.Duration) []Split {
	var out []Split
	var cur *Split
	for _, s := range holders {
		if len(s.Holders) < 2 {
			cur = nil
			continue
		}
		if cur != nil && slices.Equal(cur.Holders, s.Holders) {
			cur.To = s.At
			continue
		}
		out = append(out, Split{From: s.At, To: s.At, Holders: s.Holders})
		cur = &out[len(out)-1]
	}
	for i := range out {
		out[i].Handover = out[i].To-out[i].From < advert
	}
	return out
}

// holderAt returns the holder set of the last sample at or before t.
func holderAt(holders []Sample, t time.Duration) []string {
	var h []string
	for _, s := range holders {
		if s.At > t {
			break
		}
		h = s.Holders
	}
	return h
}

// handback reads, from the samples after recovery began at restore, who
// ended up with the VIP, when it last moved, and how long the endpoint
// stayed silent around that move.
func handback(holders, endpoint []Sample, restore time.Duration) *Handback {
	if len(holders) == 0 {
		return nil
	}
	prev := holderAt(holders, restore)
	h := &Handback{From: strings.Join(prev, " "), To: strings.Join(holders[len(holders)-1].Holders, " ")}
	moved := time.Duration(-1)
	for _, s := range holders {
		if s.At <= restore {
			continue
		}
		if !slices.Equal(prev, s.Holders) {
			moved = s.At
		}
		prev = s.Holders
	}
	if moved >= 0 {
		h.At = moved - restore
		h.Gap = outageAround(endpoint, moved)
	}
	return h
}

// outageAround is the longest run of failed endpoint probes near t
// (overlapping t ± nearMove), from the run's first failure to the next
// answer (or the last sample): the endpoint is probed and the holders
// listed independently, so the silence of a move may begin a little
// before the new holder shows.
func outageAround(endpoint []Sample, t time.Duration) time.Duration {
	var longest time.Duration
	for i := 0; i < len(endpoint); i++ {
		if endpoint[i].Answers {
			continue
		}
		start := endpoint[i].At
		j := i
		for j < len(endpoint) && !endpoint[j].Answers {
			j++
		}
		end := endpoint[len(endpoint)-1].At
		if j < len(endpoint) {
			end = endpoint[j].At
		}
		if start <= t+nearMove && end >= t-nearMove {
			longest = max(longest, end-start)
		}
		i = j
	}
	return longest
}

// nearMove is how far from a holder change an outage still belongs to it.
const nearMove = time.Second
