package lifecycle

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/lifecycle/internal/mcpserve"
	"github.com/mcpkeep/mcpkeep/statefile"
)

// TestHealthBody: /healthz's body says what each figure is as of: ok and
// checked_at are the last health check's, live_at is when the body was
// made, which the live figures (status, http, role) are as of; the fields
// readers already use keep their names and shape.
func TestHealthBody(t *testing.T) {
	checked := time.Now().UTC().Add(-20 * time.Second).Truncate(time.Second)
	for _, tc := range []struct {
		name    string
		health  *statefile.Health
		ok      bool
		checked bool // checked_at is there
	}{
		{"before the first check", nil, true, false},
		{"a passed check", &statefile.Health{OK: true, CheckedAt: checked}, true, true},
		{"a failed check", &statefile.Health{CheckedAt: checked, Problems: []string{"/h is not writable"}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statefile.State{Name: "notes", Version: "v1", Status: statefile.StatusReady, Health: tc.health,
				Cluster: &statefile.Cluster{Role: "active", Term: 7}}
			before := time.Now().UTC().Truncate(time.Millisecond)
			data, err := json.Marshal(healthBody(st, &mcpserve.Stats{}))
			require.NoError(t, err)
			after := time.Now().UTC()

			var body struct {
				OK        bool       `json:"ok"`
				CheckedAt *time.Time `json:"checked_at"`
				LiveAt    time.Time  `json:"live_at"`
				Name      string     `json:"name"`
				Status    string     `json:"status"`
				Role      string     `json:"role"`
				HTTP      *struct {
					Sessions    *int `json:"sessions"`
					Connections *int `json:"connections"`
				} `json:"http"`
			}
			require.NoError(t, json.Unmarshal(data, &body), "%s", data)
			assert.Equal(t, tc.ok, body.OK)
			if tc.checked {
				require.NotNil(t, body.CheckedAt, "%s", data)
				assert.Equal(t, checked, *body.CheckedAt)
			} else {
				assert.Nil(t, body.CheckedAt, "%s", data)
			}
			assert.False(t, body.LiveAt.Before(before), "live_at %v is when the body was made (after %v)", body.LiveAt, before)
			assert.False(t, body.LiveAt.After(after), "live_at %v is when the body was made (before %v)", body.LiveAt, after)
			assert.Equal(t, "notes", body.Name)
			assert.Equal(t, statefile.StatusReady, body.Status)
			assert.Equal(t, "active", body.Role)
			require.NotNil(t, body.HTTP, "%s", data)
			assert.NotNil(t, body.HTTP.Sessions, "%s", data)
			assert.NotNil(t, body.HTTP.Connections, "%s", data)
		})
	}
}
