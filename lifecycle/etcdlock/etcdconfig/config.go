// Package etcdconfig reads which etcd cluster elects a home's writer
// (etcdlock's Config: the home's etcd.yaml and the MCPKEEP_ETCD_*
// environment) without linking the etcd client, so that a server can tell
// whether it needs etcd before it loads it: helios does, and runs the
// mcpkeep binary, which links etcdlock, only when etcd is asked for.
// Package etcdlock re-exports every name here; use either.
//
// It checks the settings (Config.Check) but neither connects to etcd nor
// loads the TLS files: etcdlock.New does.
package etcdconfig

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpkeep/mcpkeep/atomicfile"
	"github.com/mcpkeep/mcpkeep/bootstrap"
)

// Defaults for Config fields left empty.
const (
	DefaultPrefix = "/mcpkeep/"
	DefaultTTL    = 10 * time.Second
)

// ConfigFile is the name of the home's etcd settings file.
const ConfigFile = bootstrap.EtcdFile

// Environment variables LoadConfig reads. Each overrides the home's file.
const (
	EnvEndpoints = "MCPKEEP_ETCD_ENDPOINTS" // comma-separated
	EnvPrefix    = "MCPKEEP_ETCD_PREFIX"
	EnvName      = "MCPKEEP_ETCD_NAME"
	EnvTTL       = "MCPKEEP_ETCD_TTL" // a duration, such as 10s
	EnvCert      = "MCPKEEP_ETCD_CERT"
	EnvKey       = "MCPKEEP_ETCD_KEY"
	EnvCACert    = "MCPKEEP_ETCD_CACERT"
	EnvAdvertise = "MCPKEEP_ADVERTISE_URL"
)

// Config says which etcd cluster elects a home's writer, and how. The
// zero value has no endpoints: no etcd, the home has one host.
//
// In the home's etcd.yaml the fields are endpoints, prefix, name, ttl,
// cert, key, cacert and advertise; relative file names there are relative
// to the home.
type Config struct {
	// Endpoints are the etcd cluster's client URLs
	// (https://10.0.0.1:2379) or host:port pairs.
	Endpoints []string `yaml:"endpoints"`
	// Prefix is prepended to every key; DefaultPrefix when empty.
	Prefix string `yaml:"prefix,omitempty"`
	// Name is the home's name in etcd, the same on every host that
	// serves the home: its election is at <Prefix><Name>/writer/. Letters,
	// digits, '.', '_' and '-'. "" means the name New is given.
	Name string `yaml:"name,omitempty"`
	// TTL is the writer's lease, in whole seconds: a writer that stops
	// renewing it is replaced after at most TTL (and etcd's own check
	// interval, half a second). DefaultTTL when zero.
	TTL time.Duration `yaml:"ttl,omitempty"`
	// CertFile is the client certificate, for a cluster that requires
	// one (with KeyFile). Any of the three TLS files switches TLS on, as
	// do https endpoints.
	CertFile string `yaml:"cert,omitempty"`
	// KeyFile is the client certificate's private key.
	KeyFile string `yaml:"key,omitempty"`
	// CAFile is the CA that signed the cluster's certificates; the
	// system's roots when empty.
	CAFile string `yaml:"cacert,omitempty"`
	// Advertise is the URL this host's server publishes while it is the
	// writer, which standbys give their clients
	// (lifecycle.Options.AdvertiseURL): "" means the URL it serves.
	Advertise string `yaml:"advertise,omitempty"`
}

// Enabled reports whether c names an etcd cluster.
func (c Config) Enabled() bool { return len(c.Endpoints) > 0 }

// LoadConfig returns the settings of the home's etcd.yaml, when it has one,
// overridden by the MCPKEEP_ETCD_* and MCPKEEP_ADVERTISE_URL environment
// variables that are set (getenv looks them up; nil means os.Getenv). A
// home with neither gives a Config that is not Enabled. A file that does
// not parse, or has a field it does not know, is an error naming it.
func LoadConfig(home string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	path := filepath.Join(home, ConfigFile)
	err := atomicfile.ReadYAMLStrict(path, &c)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, fs.ErrPermission) && !listable(home):
		// Another user's home: no server of this user can run on it,
		// and the harness refuses it saying so; an error about its
		// settings would hide that.
	case err != nil:
		return Config{}, fmt.Errorf("etcdlock: %w (fix or remove it; see the README's two-host example)", err)
	default:
		for _, f := range []*string{&c.CertFile, &c.KeyFile, &c.CAFile} {
			if *f != "" && !filepath.IsAbs(*f) {
				*f = filepath.Join(home, *f)
			}
		}
	}
	if v := getenv(EnvEndpoints); v != "" {
		c.Endpoints = SplitEndpoints(v)
	}
	for env, f := range map[string]*string{EnvPrefix: &c.Prefix, EnvName: &c.Name, EnvCert: &c.CertFile,
		EnvKey: &c.KeyFile, EnvCACert: &c.CAFile, EnvAdvertise: &c.Advertise} {
		if v := getenv(env); v != "" {
			*f = v
		}
	}
	if v := getenv(EnvTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("etcdlock: %s=%q is not a duration: use whole seconds, such as 10s", EnvTTL, v)
		}
		c.TTL = d
	}
	return c, nil
}

// listable reports whether this user can list dir.
func listable(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == nil || errors.Is(err, io.EOF)
}

// SplitEndpoints splits a comma-separated list of endpoints, dropping
// spaces and empty items.
func SplitEndpoints(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// validName reports whether name is 1-128 of A-Z, a-z, 0-9, '.', '_' and
// '-', starting with a letter or digit. (A loop, not a regexp: a
// {0,127} compiled at init costs every server that imports this package
// a quarter of a millisecond of its start, etcd or not.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Check fills in the defaults (DefaultPrefix, DefaultTTL, name when
// c.Name is empty) and refuses what cannot work, naming the setting:
// no endpoints, an endpoint without a port or with another scheme than
// http or https, a bad name, a TTL that is not whole seconds, a
// certificate without its key. etcdlock.New checks its Config with it.
func (c *Config) Check(name string) error {
	if !c.Enabled() {
		return errors.New("etcdlock: no endpoints: give the etcd cluster's client URLs (--etcd, " + EnvEndpoints + " or endpoints in " + ConfigFile + ")")
	}
	for _, e := range c.Endpoints {
		host := e
		if u, err := url.Parse(e); err == nil && u.Host != "" {
			if u.Scheme != "http" && u.Scheme != "https" {
				return fmt.Errorf("etcdlock: endpoint %q: the scheme must be http or https", e)
			}
			host = u.Host
		}
		if !strings.Contains(host, ":") {
			return fmt.Errorf("etcdlock: endpoint %q has no port: give host:port or a URL such as https://10.0.0.1:2379", e)
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if c.Name == "" {
		c.Name = name
	}
	if !validName(c.Name) {
		return fmt.Errorf("etcdlock: name %q: use 1-128 of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit (the same on every host of the home)", c.Name)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		return fmt.Errorf("etcdlock: ttl %v: etcd leases last whole seconds; give at least 1s, such as 10s", c.TTL)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("etcdlock: a client certificate needs both cert and key (--etcd-cert and --etcd-key)")
	}
	return nil
}

// Secure reports whether c asks for TLS: a certificate or CA file, or
// an https endpoint.
func (c *Config) Secure() bool {
	if c.CertFile != "" || c.CAFile != "" {
		return true
	}
	for _, e := range c.Endpoints {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}
