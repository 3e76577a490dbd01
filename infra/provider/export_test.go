package provider

import (
	"context"
	"time"
)

// For the external tests (package provider_test), which reach real nodes
// of the lab and so cannot be in this package: labtest imports it.

// Configured is ctx with the provider configured as for an up (SSH from
// the namespace ssh.NetnsEnv names).
func Configured(ctx context.Context) (context.Context, error) {
	var c Config
	if err := c.Configure(ctx); err != nil {
		return nil, err
	}
	return withConfig(ctx, &c), nil
}

// SetNetplanRollbackAfter shortens the node's wait before it undoes an
// unconfirmed network change, for the test that waits for it.
func SetNetplanRollbackAfter(d time.Duration) (restore func()) {
	old := netplanRollbackAfter
	netplanRollbackAfter = d
	return func() { netplanRollbackAfter = old }
}
