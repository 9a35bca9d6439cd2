# fencing: leases with fencing tokens for PostgreSQL (PGXS build)

EXTENSION = fencing
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)
MODULE_big = fencing
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
PGFILEDESC = "fencing - leases with fencing tokens"
# the extension version, for PG_MODULE_MAGIC_EXT in src/fencing.c
PG_CPPFLAGS = -DFENCING_VERSION=\"$(EXTVERSION)\"

DATA = $(wildcard fencing--*.sql)

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=$(EXTENSION)
ISOLATION = $(patsubst specs/%.spec,%,$(sort $(wildcard specs/*.spec)))
ISOLATION_OPTS = --load-extension=$(EXTENSION)
TAP_TESTS = 1

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXN distribution archive, named after META.json's version, which
# scripts/release_check.sh keeps in step with default_version
DISTVERSION = $(shell sed -n 's/^   "version": "\([^"]*\)",$$/\1/p' META.json)
dist:
	bash scripts/release_check.sh
	git archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ -o $(EXTENSION)-$(DISTVERSION).zip HEAD

release-check:
	bash scripts/release_check.sh

.PHONY: dist release-check
