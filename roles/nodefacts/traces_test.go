package nodefacts

import "testing"

func TestParsePresenceIgnoresNoise(t *testing.T) {
	got := ParsePresence("Welcome to cp-1\npresent=" + AdminConf + "\npresent=\n" + KubeletConf + "\n")
	if len(got) != 1 || !got[AdminConf] {
		t.Errorf("got %v", got)
	}
}
