package etcdlock

import "github.com/mcpkeep/mcpkeep/lifecycle/etcdlock/etcdconfig"

// The settings live in package etcdconfig, which does not link the etcd
// client, so that a server can read them before it decides to load this
// package; these names are the same ones.

// Defaults for Config fields left empty.
const (
	DefaultPrefix = etcdconfig.DefaultPrefix
	DefaultTTL    = etcdconfig.DefaultTTL
)

// ConfigFile is the name of the home's etcd settings file.
const ConfigFile = etcdconfig.ConfigFile

// Environment variables LoadConfig reads. Each overrides the home's file.
const (
	EnvEndpoints = etcdconfig.EnvEndpoints // comma-separated
	EnvPrefix    = etcdconfig.EnvPrefix
	EnvName      = etcdconfig.EnvName
	EnvTTL       = etcdconfig.EnvTTL // a duration, such as 10s
	EnvCert      = etcdconfig.EnvCert
	EnvKey       = etcdconfig.EnvKey
	EnvCACert    = etcdconfig.EnvCACert
	EnvAdvertise = etcdconfig.EnvAdvertise
)

// Config says which etcd cluster elects a home's writer, and how: see
// etcdconfig.Config for its fields. The zero value has no endpoints: no
// etcd, the home has one host.
type Config = etcdconfig.Config

// LoadConfig returns the settings of the home's etcd.yaml, when it has one,
// overridden by the MCPKEEP_ETCD_* and MCPKEEP_ADVERTISE_URL environment
// variables that are set (getenv looks them up; nil means os.Getenv). A
// home with neither gives a Config that is not Enabled. A file that does
// not parse, or has a field it does not know, is an error naming it.
func LoadConfig(home string, getenv func(string) string) (Config, error) {
	return etcdconfig.LoadConfig(home, getenv)
}

// SplitEndpoints splits a comma-separated list of endpoints, dropping
// spaces and empty items.
func SplitEndpoints(s string) []string { return etcdconfig.SplitEndpoints(s) }
