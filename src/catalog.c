/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The per-backend cache of the extension's OIDs, switching to the
 *	  extension owner for internal queries, and who is an admin: part of
 *	  the base layer (fencing.h), which calls no other layer.
 *
 * Every table and sequence of the extension belongs to its owner and no
 * other role gets privileges on them.  The C functions run their internal
 * queries as that owner, so callers need only EXECUTE on the functions:
 * nobody can write a lease row or move a sequence by hand.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "fencing.h"

static FencingCatalog catalog;
static bool catalog_valid = false;

/*
 * The only relcache callback of the extension.  Creating or dropping an
 * index of fencing.leases invalidates the table too, so its OID covers
 * the primary key.
 */
static void
fencing_relcache_callback(Datum arg, Oid relid)
{
	if (!catalog_valid)
		return;
	if (relid == InvalidOid ||
		relid == catalog.leases_oid ||
		relid == catalog.token_seq_oid ||
		relid == catalog.token_base_oid ||
		relid == catalog.token_origin_oid ||
		relid == catalog.token_band_oid ||
		relid == catalog.token_witness_oid ||
		relid == catalog.token_offset_oid)
		catalog_valid = false;
}

void
fencing_catalog_init(void)
{
	CacheRegisterRelcacheCallback(fencing_relcache_callback, (Datum) 0);
}

static Oid
lookup_member(const char *relname, Oid nsp)
{
	Oid			relid = get_relname_relid(relname, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation \"fencing.%s\" does not exist", relname),
				 errhint("Reinstall the extension with DROP EXTENSION fencing; CREATE EXTENSION fencing.")));
	return relid;
}

const FencingCatalog *
fencing_catalog(void)
{
	Relation	rel;

	if (catalog_valid)
		return &catalog;

	catalog.namespace_oid = get_namespace_oid("fencing", false);
	catalog.leases_oid = lookup_member("leases", catalog.namespace_oid);
	catalog.token_seq_oid = lookup_member("token_seq", catalog.namespace_oid);
	catalog.token_base_oid = lookup_member("token_base", catalog.namespace_oid);
	catalog.token_origin_oid = lookup_member("token_origin", catalog.namespace_oid);
	catalog.token_band_oid = lookup_member("token_band", catalog.namespace_oid);
	catalog.token_witness_oid = lookup_member("token_witness", catalog.namespace_oid);
	catalog.token_offset_oid = lookup_member("token_band_offset", catalog.namespace_oid);

	rel = relation_open(catalog.leases_oid, AccessShareLock);
	catalog.owner_oid = rel->rd_rel->relowner;
	relation_close(rel, AccessShareLock);

	catalog.generation++;
	catalog_valid = true;
	return &catalog;
}

/* Superusers and members of the role fencing_admin, if it exists. */
bool
fencing_is_admin(Oid roleid)
{
	Oid			admin;

	if (superuser_arg(roleid))
		return true;
	admin = get_role_oid("fencing_admin", true);
	return OidIsValid(admin) && has_privs_of_role(roleid, admin);
}

/*
 * SECURITY_RESTRICTED_OPERATION keeps the caller's temporary objects and
 * role changes out of what runs as the owner.
 */
void
fencing_become_owner(FencingOwnerScope *scope)
{
	const FencingCatalog *cat = fencing_catalog();

	GetUserIdAndSecContext(&scope->saved_userid, &scope->saved_sec_context);
	SetUserIdAndSecContext(cat->owner_oid,
						   scope->saved_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

void
fencing_restore_user(const FencingOwnerScope *scope)
{
	SetUserIdAndSecContext(scope->saved_userid, scope->saved_sec_context);
}
