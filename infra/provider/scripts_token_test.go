package provider

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
)

func TestTokenScriptsGolden(t *testing.T) {
	a := tokenArgs{Kubectl: kubectl, ID: "abcdef"}
	scriptstest.Golden(t, scripts.Render("token/create", a), "")
	scriptstest.Golden(t, scripts.Render("token/delete", a), "")
	scriptstest.Golden(t, scripts.Render("token/delete-init", tokenArgs{Kubectl: kubectl, Type: "bootstrap.kubernetes.io/token"}), "")
}
