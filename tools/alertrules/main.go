// Command alertrules runs alert rule tests written in promtool's test format (input_series and
// alert_rule_test) against a rule file, with Prometheus's own rule manager and PromQL engine.
// promtool itself is not built: it links every service-discovery SDK, minutes of compiling for CI.
// Differences from promtool: exp_annotations are compared only where a case lists them, and
// promql_expr_test is not supported (a file using it is refused).
//
// Usage: alertrules RULE_FILE TEST_FILE
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v2"
)

type testFile struct {
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

type testGroup struct {
	Name        string          `yaml:"name"`
	Interval    model.Duration  `yaml:"interval"`
	InputSeries []inputSeries   `yaml:"input_series"`
	AlertTests  []alertTestCase `yaml:"alert_rule_test"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration  `yaml:"eval_time"`
	Alertname string          `yaml:"alertname"`
	ExpAlerts []expectedAlert `yaml:"exp_alerts"`
}

type expectedAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: alertrules RULE_FILE TEST_FILE")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var file testFile
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[2], err)
		os.Exit(2)
	}
	evalInterval := time.Duration(file.EvaluationInterval)
	if evalInterval == 0 {
		evalInterval = time.Minute
	}
	failed := 0
	for _, group := range file.Tests {
		problems := run(group, evalInterval, os.Args[1])
		if len(problems) == 0 {
			fmt.Printf("PASS %s\n", group.Name)
			continue
		}
		failed++
		fmt.Printf("FAIL %s\n", group.Name)
		for _, problem := range problems {
			fmt.Printf("    %s\n", problem)
		}
	}
	fmt.Printf("%d of %d test groups failed\n", failed, len(file.Tests))
	if failed > 0 || len(file.Tests) == 0 {
		os.Exit(1)
	}
}

// run evaluates every rule group of ruleFile at each evaluation step from 0 to the latest eval_time, as
// Prometheus would, and compares the firing alerts with the expected ones at each eval_time.
func run(group testGroup, evalInterval time.Duration, ruleFile string) []string {
	promql := parser.NewParser(parser.Options{})
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", group.Interval)
	for _, series := range group.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", series.Series, series.Values)
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promql,
	})
	if err != nil {
		return []string{err.Error()}
	}
	defer suite.Close()
	suite.SubqueryInterval = evalInterval
	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promql,
	})
	groups, errs := manager.LoadGroups(evalInterval, labels.EmptyLabels(), "", nil, false, ruleFile)
	if errs != nil {
		return describe(errs)
	}
	due := map[time.Duration][]alertTestCase{}
	var last time.Duration
	for _, test := range group.AlertTests {
		at := time.Duration(test.EvalTime)
		if at%evalInterval != 0 {
			return []string{fmt.Sprintf("eval_time %s is not a multiple of evaluation_interval %s", test.EvalTime, evalInterval)}
		}
		due[at] = append(due[at], test)
		last = max(last, at)
	}
	for _, g := range groups {
		for _, rule := range g.AlertingRules() {
			rule.SetRestored(true) // as after a restore: `for` counts from the first evaluation
		}
	}
	var problems []string
	start := time.Unix(0, 0).UTC()
	for at := time.Duration(0); at <= last; at += evalInterval {
		suite.WithSamplesTill(start.Add(at), func(err error) {
			if err != nil {
				problems = append(problems, err.Error())
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), start.Add(at))
				for _, rule := range g.Rules() {
					if rule.LastError() != nil {
						problems = append(problems, fmt.Sprintf("%s at %s: %v", rule.Name(), at, rule.LastError()))
					}
				}
			}
		})
		for _, test := range due[at] {
			problems = append(problems, compare(test, firing(groups, test.Alertname))...)
		}
	}
	return problems
}

// firing lists every firing alert of the rules named alertname, ordered by labels.
func firing(groups map[string]*rules.Group, alertname string) []*rules.Alert {
	var found []*rules.Alert
	for _, g := range groups {
		for _, rule := range g.AlertingRules() {
			if rule.Name() != alertname {
				continue
			}
			for _, alert := range rule.ActiveAlerts() {
				if alert.State == rules.StateFiring {
					found = append(found, alert)
				}
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return labels.Compare(found[i].Labels, found[j].Labels) < 0 })
	return found
}

// compare matches the firing alerts with the expected ones by their labels (alertname added, as Prometheus
// adds it); each annotation an expected alert lists must be what the firing one says.
func compare(test alertTestCase, got []*rules.Alert) []string {
	where := fmt.Sprintf("%s at %s", test.Alertname, test.EvalTime)
	type wanted struct {
		labels      labels.Labels
		annotations map[string]string
	}
	var expected []wanted
	for _, alert := range test.ExpAlerts {
		with := map[string]string{labels.AlertName: test.Alertname}
		for name, value := range alert.ExpLabels {
			with[name] = value
		}
		expected = append(expected, wanted{labels.FromMap(with), alert.ExpAnnotations})
	}
	sort.Slice(expected, func(i, j int) bool { return labels.Compare(expected[i].labels, expected[j].labels) < 0 })
	var gotLabels []string
	for _, alert := range got {
		gotLabels = append(gotLabels, alert.Labels.String())
	}
	if len(expected) != len(got) {
		return []string{fmt.Sprintf("%s: want %d firing, got %d %v", where, len(expected), len(got), gotLabels)}
	}
	var problems []string
	for i, alert := range got {
		if !labels.Equal(expected[i].labels, alert.Labels) {
			problems = append(problems, fmt.Sprintf("%s: want %s, got %s", where, expected[i].labels, alert.Labels))
			continue
		}
		for name, value := range expected[i].annotations {
			if said := alert.Annotations.Get(name); said != value {
				problems = append(problems, fmt.Sprintf("%s: annotation %s: want %q, got %q", where, name, value, said))
			}
		}
	}
	return problems
}

func describe(errs []error) []string {
	var said []string
	for _, err := range errs {
		said = append(said, err.Error())
	}
	return said
}
