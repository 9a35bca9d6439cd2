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
# t/ is in a clone, not in the archive of make dist (.gitattributes)
TAP_TESTS := $(if $(wildcard t/*.pl),1)

# fencing-lock (src/bin/): runs a command under a lease; a libpq client
FENCING_LOCK = src/bin/fencing-lock
EXTRA_CLEAN = $(FENCING_LOCK)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS builds one module or program per Makefile, so fencing-lock has rules
# of its own: the server's compiler and flags (PG_CFLAGS too), its libpq,
# installed beside the server's programs (pg_config --bindir)
all: $(FENCING_LOCK)
$(FENCING_LOCK): src/bin/fencing-lock.c
	$(CC) $(CFLAGS) -I$(libpq_srcdir) -DFENCING_VERSION=\"$(EXTVERSION)\" $< $(LDFLAGS) $(LDFLAGS_EX) $(libpq) -o $@

install: install-fencing-lock
installdirs: installdirs-fencing-lock
uninstall: uninstall-fencing-lock
install-fencing-lock: $(FENCING_LOCK) installdirs-fencing-lock
	$(INSTALL_PROGRAM) $(FENCING_LOCK) '$(DESTDIR)$(bindir)/fencing-lock'
installdirs-fencing-lock:
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
uninstall-fencing-lock:
	rm -f '$(DESTDIR)$(bindir)/fencing-lock'

# PGXN distribution archive, named after META.json's version, which
# test/release_check.sh keeps in step with default_version
DISTVERSION = $(shell sed -n 's/^   "version": "\([^"]*\)",$$/\1/p' META.json)
dist:
	bash test/release_check.sh
	git archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ -o $(EXTENSION)-$(DISTVERSION).zip HEAD

release-check:
	bash test/release_check.sh

.PHONY: dist release-check install-fencing-lock installdirs-fencing-lock uninstall-fencing-lock
