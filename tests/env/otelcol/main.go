// A minimal OpenTelemetry Collector for the test environment (tests/env/testenv.sh): what the
// collector's builder (ocb) would generate for one receiver and one exporter, written by hand so
// the module stays two files. Traces arrive over OTLP/HTTP (otlpreceiver) and are written as OTLP
// JSON lines (fileexporter), which an e2e test reads back. No processors: no batching delay
// between a received request and the file.
package main

import (
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{
		// The collector's own logs and (here: disabled) metrics; it refuses to start without one.
		Telemetry: otelconftelemetry.NewFactory(),
	}
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	return factories, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "orchard-otelcol",
			Description: "OpenTelemetry Collector of Orchard's test environment (OTLP in, JSON lines out)",
			Version:     "0.161.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// `--config <file>` (testenv.sh writes the config into its state dir); env is the
				// resolver's default scheme for a bare ${VAR}, and it refuses to start without it.
				ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
			},
		},
	}
	// The command prints its error itself ("Error: ..."); only the exit status is left to do.
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1)
	}
}
