# The two commands of the README. Both set up everything themselves on a fresh machine:
# a virtual environment in .venv, torch (a CPU build, pinned, where there is no CUDA), and an
# editable install of coupled_qk with its dependencies.
VENV    ?= .venv
PY      := $(VENV)/bin/python
SCALE   ?= cpu
JOBS    ?= 2
# Which artifacts to make (empty = all), e.g. make reproduce ARTIFACTS="main_table corpus"
ARTIFACTS ?=
PYTHON  ?= python3
# An unpinned torch pulls a multi-GB CUDA build; without a GPU we pin the CPU build.
TORCH   ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)

.PHONY: setup test reproduce docs index export clean-nbs

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install -q --disable-pip-version-check -e .
	touch $@

# Run every notebook's tests (through pytest, one notebook at a time) and the project checks.
test: setup
	$(PY) -m pytest tests

# The main job: regenerate the figures and tables at SCALE (default: cpu).
reproduce: setup
	$(VENV)/bin/coupled-qk reproduce $(ARTIFACTS) --scale $(SCALE) --jobs $(JOBS)

# A static HTML site of the chapters, paper and experiment notebooks in _docs/ (nbconvert: a registry-installable
# tool that needs no Quarto binary), with the front page as index.html. EXECUTE=1 runs each notebook first.
EXECUTE ?=
docs: setup index
	rm -rf _docs && mkdir -p _docs/paper _docs/experiments
	$(VENV)/bin/jupyter-nbconvert --to html --output-dir _docs $(if $(EXECUTE),--execute) nbs/*.ipynb
	$(VENV)/bin/jupyter-nbconvert --to html --output-dir _docs/paper $(if $(EXECUTE),--execute) nbs/paper/*.ipynb
	$(VENV)/bin/jupyter-nbconvert --to html --output-dir _docs/experiments nbs/experiments/*.ipynb
	@echo "docs: open _docs/index.html"

# The docs' front page is the README, one source: nbs/index.ipynb is written from it (nbdev-readme would go the
# other way; tests/test_project.py checks that the two agree).
index: setup
	$(PY) -c "import nbformat as n; c = n.v4.new_markdown_cell(open('README.md').read().rstrip(), id='readme'); \
	n.write(n.v4.new_notebook(cells=[c], metadata={'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}}), 'nbs/index.ipynb')"
	$(VENV)/bin/nbdev-clean --fname nbs/index.ipynb

# Developer helpers: export the package from the notebooks, and clean the notebooks.
export: setup
	$(VENV)/bin/nbdev-export
clean-nbs: setup
	$(VENV)/bin/nbdev-clean
