package recovery_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/recovery"
)

// TestCheckConfig: the syntax a file's name asks for, then Validate, for
// any name; Validate is not asked about bytes that do not parse.
func TestCheckConfig(t *testing.T) {
	errRefused := errors.New("refused")
	for _, tc := range []struct {
		rel, data string
		corrupt   bool // a *atomicfile.CorruptError
		validated bool // Validate was asked
	}{
		{rel: "a.yaml", data: "a: 1\n", validated: true},
		{rel: "a.yaml", data: "a: [\n", corrupt: true},
		{rel: "d/a.YML", data: "a: [\n", corrupt: true},
		{rel: "a.yaml", data: "", corrupt: true},
		{rel: "a.json", data: `{"a": 1}`, validated: true},
		{rel: "a.json", data: "a: 1\n", corrupt: true},
		{rel: "notes.txt", data: "a: [\n", validated: true},
	} {
		t.Run(tc.rel+"/"+tc.data, func(t *testing.T) {
			var asked []string
			validate := func(rel string, _ []byte) error { asked = append(asked, rel); return nil }
			err := recovery.CheckConfig(tc.rel, []byte(tc.data), validate)
			var ce *atomicfile.CorruptError
			if tc.corrupt {
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.rel, ce.Path)
			} else {
				require.NoError(t, err)
			}
			if tc.validated {
				assert.Equal(t, []string{tc.rel}, asked)
			} else {
				assert.Empty(t, asked)
			}
			assert.Equal(t, tc.corrupt, recovery.CheckConfig(tc.rel, []byte(tc.data), nil) != nil, "without Validate")
		})
	}
	err := recovery.CheckConfig("a.yaml", []byte("a: 1\n"), func(string, []byte) error { return errRefused })
	assert.Same(t, errRefused, err, "Validate's error as it is")
}

// BenchmarkCheckConfig is what a transaction's write of a 1 KiB YAML file
// adds to a change: the parse recovery would make (no Validate).
//
//	go test -run '^$' -bench CheckConfig ./recovery
func BenchmarkCheckConfig(b *testing.B) {
	data := append([]byte("a: "), bytes.Repeat([]byte("x"), 1024)...)
	data = append(data, '\n')
	for b.Loop() {
		if err := recovery.CheckConfig("a.yaml", data, nil); err != nil {
			b.Fatal(err)
		}
	}
}
