package etcdbackup

import (
	"strings"
	"testing"
)

// The names a node lists become a local file name in snapshot --fetch: a
// node (compromised, or a stranger behind a reused address) must not be
// able to name a file outside the output with ../ or a slash, whatever
// its shell printed.
func TestListingRefusesNamesTheTimerDoesNotWrite(t *testing.T) {
	n := &node{}
	n.Name = "cp-1"
	good := "1764806400 snapshot-20261203T000000Z.db\n1764892800 snapshot-20261204T000000Z.db\n"
	list, err := parseListing(n, good)
	if err != nil || len(list) != 2 || list[0].name != "snapshot-20261204T000000Z.db" {
		t.Fatalf("good listing: %v %v", list, err)
	}
	if list, err := parseListing(n, ""); err != nil || len(list) != 0 {
		t.Errorf("empty listing: %v %v", list, err)
	}
	for _, bad := range []string{
		"../../../home/user/.bashrc",
		"../snapshot-20261205T000000Z.db",
		"/tmp/snapshot-20261205T000000Z.db",
		"snapshot-20261205T000000Z.db/../../x",
		"sub/snapshot-20261205T000000Z.db",
		"snapshot-20261205T000000Z.db.sha256",
		"snapshot-20261205T000000Z.db x",
		"..",
	} {
		_, err := parseListing(n, good+"1764979200 "+bad+"\n")
		if err == nil {
			t.Errorf("%q: accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "cp-1") || !strings.Contains(msg, "snapshot-YYYYMMDDTHHMMSSZ.db") {
			t.Errorf("%q: the error names neither the node nor the expected name: %v", bad, err)
		}
	}
}
