// Command printinfo prints buildinfo.Read as JSON, for buildinfo's tests.
package main

import (
	"encoding/json"
	"os"

	"github.com/mcpkeep/mcpkeep/internal/buildinfo"
)

func main() {
	i := buildinfo.Read()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{
		"version": i.Version, "commit": i.Commit, "detail": i.Detail, "string": i.String()})
}
