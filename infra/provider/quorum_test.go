package provider

import (
	"strings"
	"testing"
)

func TestRemovalProblem(t *testing.T) {
	h := func(id uint64, healthy bool) memberHealth {
		return memberHealth{ID: id, Name: "m", Started: true, Healthy: healthy}
	}
	for _, c := range []struct {
		name    string
		members []memberHealth
		remove  uint64
		unsafe  string // a word the problem must hold; "" for safe
	}{
		{"3 healthy, remove one", []memberHealth{h(1, true), h(2, true), h(3, true)}, 3, ""},
		{"3, one dead, remove the dead", []memberHealth{h(1, true), h(2, true), h(3, false)}, 3, ""},
		{"3, one dead, remove a healthy one", []memberHealth{h(1, true), h(2, false), h(3, true)}, 3, "quorum"},
		{"2 healthy, remove one", []memberHealth{h(1, true), h(2, true)}, 2, ""},
		{"2, remove the healthy one", []memberHealth{h(1, false), h(2, true)}, 2, "quorum"},
		{"the last member", []memberHealth{h(1, true)}, 1, "last"},
		{"5, two dead, remove a healthy", []memberHealth{h(1, true), h(2, true), h(3, true), h(4, false), h(5, false)}, 1, "quorum"},
		{"5, two dead, remove a dead", []memberHealth{h(1, true), h(2, true), h(3, true), h(4, false), h(5, false)}, 5, ""},
		{"a learner", []memberHealth{h(1, true), {ID: 2, Learner: true}}, 2, ""},
		{"learners do not make quorum", []memberHealth{h(1, false), h(2, true), {ID: 3, Learner: true, Healthy: true}}, 2, "quorum"},
		{"not a member", []memberHealth{h(1, true)}, 9, ""},
	} {
		got := removalProblem(c.members, c.remove)
		if (got == "") != (c.unsafe == "") || !strings.Contains(got, c.unsafe) {
			t.Errorf("%s: %q, want a problem with %q", c.name, got, c.unsafe)
		}
	}
}

func TestRefusalSaysHowToConsent(t *testing.T) {
	err := refused("cp-3", "resetting the node", "lose its etcd member")
	for _, want := range []string{RefusedMarker, "cp-3", "--allow-destroy cp-3", EnvAllowDestroy + "=cp-3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
}
