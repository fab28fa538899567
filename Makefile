# The two commands of the README. Both set up everything themselves on a fresh machine: a virtual environment
# in .venv holding exactly the locked versions (requirements/*.lock, torch included), and an editable install of
# coupled_qk on top of them.
VENV    ?= .venv
PY      := $(VENV)/bin/python
SCALE   ?= cpu
JOBS    ?= 2
# Which artifacts to make (empty = all), e.g. make reproduce ARTIFACTS="main_table corpus"
ARTIFACTS ?=
PYTHON  ?= python3
# Which lock: the CUDA one where there is a GPU driver (nvidia-smi), else the CPU one (torch's CPU build; an
# unpinned torch would pull a multi-GB CUDA build). coupled_qk.provenance.lock_path() applies the same rule.
VARIANT ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo cuda || echo cpu)
LOCK    := requirements/$(VARIANT).lock
# pip-compile lives in its own environment, so that it is not part of the locked one it writes.
LOCK_TOOLS := $(VENV)/lock-tools
PIP_TOOLS  ?= pip-tools==7.6.2
# `make lock` moves every pin to the newest release that pyproject.toml and requirements/*.in allow;
# `make lock UPGRADE=` keeps the current pins and only adds what a new dependency needs.
UPGRADE ?= 1
PIP_COMPILE = $(LOCK_TOOLS)/bin/pip-compile --quiet --extra hf --extra eval --allow-unsafe --strip-extras --no-emit-index-url \
	--no-emit-find-links $(if $(UPGRADE),--upgrade)

.PHONY: setup test apt-index-tool reproduce docs index export clean-nbs lock

setup: $(VENV)/.installed

# pyproject.toml too: its entry points and package metadata live in the editable install.
$(VENV)/.installed: $(LOCK) pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r $(LOCK)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# Regenerate both locks and environment.yml from pyproject.toml (with the hf and eval extras) and requirements/*.in.
# The CPU lock resolves with this machine's pip settings (its find-links hold torch's CPU wheel); the CUDA lock
# without them, from the package index alone, whose Linux torch wheel is the CUDA build.
lock: $(LOCK_TOOLS)/bin/pip-compile
	$(PIP_COMPILE) -o requirements/cpu.lock pyproject.toml requirements/cpu.in
	env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null $(PIP_COMPILE) -o requirements/cuda.lock pyproject.toml requirements/cuda.in
	$(PYTHON) -c "import sys; sys.path.insert(0, '.'); from coupled_qk.provenance import environment_yml; \
	open('environment.yml', 'w').write(environment_yml('requirements/cpu.lock'))"
	@echo "lock: review 'git diff requirements environment.yml', then 'make setup' installs the new lock"

$(LOCK_TOOLS)/bin/pip-compile:
	$(PYTHON) -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/pip install -q --disable-pip-version-check "$(PIP_TOOLS)"

# Run every notebook's tests (through pytest, one notebook at a time) and the project checks, on TEST_WORKERS
# pytest-xdist workers (the Slurm tests share one worker, as they share one cluster). The 15 slowest tests are listed
# at the end, so a CI log says where its minutes went.
TEST_WORKERS ?= 2
test: setup apt-index-tool
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=15 tests

# tests/test_debian.py builds a file:// apt archive, whose index needs apt-ftparchive (apt-utils) or dpkg-scanpackages
# (dpkg-dev): as root on a Debian machine with neither, apt-utils is installed (apt's lists refreshed if they lack it).
apt-index-tool:
	@if ! command -v apt-ftparchive >/dev/null && ! command -v dpkg-scanpackages >/dev/null \
	    && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq apt-utils >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq apt-utils; }; fi

# The main job: regenerate the figures and tables at SCALE (default: cpu).
reproduce: setup
	$(VENV)/bin/coupled-qk reproduce $(ARTIFACTS) --scale $(SCALE) --jobs $(JOBS)

# A static HTML site of the notebooks in DOCS (default _docs/), built by Sphinx with myst-nb (docs/conf.py) from nbs/
# as committed, never executing a notebook, and working with no network (MathJax 3 from the locked wheel
# django-static-mathjax, the furo theme's own assets): the front page (nbs/index.ipynb, from the README) with the
# contents, the chapters, the paper notebooks, each with its artifact's figures and tables at DOCS_SCALE (default
# cpu: the committed results), and the experiments. tests/test_docs.py builds it and checks it.
DOCS       ?= _docs
DOCS_CACHE ?= .cache/docs
DOCS_SCALE ?= cpu
docs: setup index
	rm -rf $(DOCS)
	DOCS_SCALE=$(DOCS_SCALE) $(PY) -m sphinx -b html -E -q -c docs -d $(DOCS_CACHE)/doctrees nbs $(DOCS)
	@echo "docs: open $(DOCS)/index.html"

# The docs' front page is the README, one source: nbs/index.ipynb is written from it (nbdev-readme would go the
# other way; tests/test_project.py checks that the two agree).
index: setup
	$(PY) -c "import nbformat as n; c = n.v4.new_markdown_cell(open('README.md').read().rstrip(), id='readme'); \
	n.write(n.v4.new_notebook(cells=[c], metadata={'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}}), 'nbs/index.ipynb')"
	$(VENV)/bin/nbdev-clean --fname nbs/index.ipynb

# Developer helpers: export the package from the notebooks, and clean the notebooks.
export: setup
	$(VENV)/bin/nbdev-export
	$(PY) scripts/wrap_all.py coupled_qk
clean-nbs: setup
	$(VENV)/bin/nbdev-clean
