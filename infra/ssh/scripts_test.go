package ssh

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

// The transport's own commands are scripts like any other: golden, and
// shellchecked by infra/scripts.
func TestTransportScriptsGolden(t *testing.T) {
	p := "/etc/kubernetes/it's here.conf"
	tmp := "/etc/kubernetes/.it's here.conf.homelab-0a1b2c3d4e5f"
	scriptstest.Golden(t, readScript(p), "")
	scriptstest.Golden(t, uploadPrepare(p), "")
	scriptstest.Golden(t, uploadFinish(p, tmp, 0o640), "")
	scriptstest.Golden(t, uploadDiscard(tmp), "")
	scriptstest.Golden(t, killGroupScript(4242), "")
}
