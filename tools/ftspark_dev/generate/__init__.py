"""What `make crds`, `make deploy`, `make docs` and `make argocd` generate from the models and the chart."""
