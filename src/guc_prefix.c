/*-------------------------------------------------------------------------
 *
 * guc_prefix.c
 *	  The "fencing." prefix of configuration parameters is reserved: a
 *	  misspelt name such as fencing.tokens is an error, not a placeholder
 *	  that fence_guard never reads (the write would go through as if no
 *	  token had been declared).
 *
 * PostgreSQL 15 and later do this themselves (MarkGUCPrefixReserved).  On
 * 13 and 14 a ProcessUtility hook refuses SET, RESET, ALTER SYSTEM and
 * ALTER ROLE/DATABASE ... SET of such names with 15's error, and because
 * set_config() and values set before the library loaded do not pass
 * through it, fence_guard and claim_guard refuse to let a write through
 * unfenced while a "fencing." placeholder has a value.  docs/versions.md describes the
 * difference.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "tcop/utility.h"
#include "utils/guc.h"
#if PG_VERSION_NUM < 150000
#include "utils/guc_tables.h"
#endif

#include "fencing.h"

#define FENCING_GUC_PREFIX "fencing"

#if PG_VERSION_NUM < 150000

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* "fencing.<anything>"; parameter names are case-insensitive */
static bool
has_fencing_prefix(const char *name)
{
	size_t		len = strlen(FENCING_GUC_PREFIX);

	return pg_strncasecmp(name, FENCING_GUC_PREFIX, len) == 0 &&
		name[len] == GUC_QUALIFIER_SEPARATOR;
}

/* defined by the library, not a placeholder */
static bool
is_defined_parameter(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
	{
		if (pg_strcasecmp(vars[i]->name, name) == 0)
			return (vars[i]->flags & GUC_CUSTOM_PLACEHOLDER) == 0;
	}
	return false;
}

static void
report_reserved(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_NAME),
			 errmsg("invalid configuration parameter name \"%s\"", name),
			 errdetail("\"%s\" is a reserved prefix.", FENCING_GUC_PREFIX)));
}

static void
check_set_stmt(VariableSetStmt *stmt)
{
	/* RESET ALL has no name; SET TRANSACTION and the like are not ours */
	if (stmt == NULL || stmt->name == NULL)
		return;
	if (has_fencing_prefix(stmt->name) && !is_defined_parameter(stmt->name))
		report_reserved(stmt->name);
}

static void
fencing_utility_hook(PlannedStmt *pstmt, const char *queryString,
#if PG_VERSION_NUM >= 140000
					 bool readOnlyTree,
#endif
					 ProcessUtilityContext context, ParamListInfo params,
					 QueryEnvironment *queryEnv, DestReceiver *dest,
					 QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	switch (nodeTag(parsetree))
	{
		case T_VariableSetStmt:
			check_set_stmt((VariableSetStmt *) parsetree);
			break;
		case T_AlterSystemStmt:
			check_set_stmt(((AlterSystemStmt *) parsetree)->setstmt);
			break;
		case T_AlterRoleSetStmt:
			check_set_stmt(((AlterRoleSetStmt *) parsetree)->setstmt);
			break;
		case T_AlterDatabaseSetStmt:
			check_set_stmt(((AlterDatabaseSetStmt *) parsetree)->setstmt);
			break;
		default:
			break;
	}

	if (prev_utility_hook)
		prev_utility_hook(pstmt, queryString,
#if PG_VERSION_NUM >= 140000
						  readOnlyTree,
#endif
						  context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString,
#if PG_VERSION_NUM >= 140000
								readOnlyTree,
#endif
								context, params, queryEnv, dest, qc);
}

#endif							/* PG_VERSION_NUM < 150000 */

/* Called from _PG_init, after the library's parameters are defined. */
void
fencing_reserve_guc_prefix(void)
{
#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved(FENCING_GUC_PREFIX);
#else
	/* placeholders set before the library loaded: core's WARNING */
	EmitWarningsOnPlaceholders(FENCING_GUC_PREFIX);
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = fencing_utility_hook;
#endif
}

/*
 * A write about to go through unfenced (no token, and the trigger allows
 * that): on 13 and 14, refuse it while a "fencing." placeholder has a
 * value, since that value was most likely meant as the token.  Nothing to
 * do on 15 and later, where no such placeholder can exist.
 */
void
fencing_refuse_guc_placeholders(void)
{
#if PG_VERSION_NUM < 150000
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
	{
		struct config_generic *var = vars[i];
		const char *value;

		if ((var->flags & GUC_CUSTOM_PLACEHOLDER) == 0 ||
			var->vartype != PGC_STRING ||
			!has_fencing_prefix(var->name))
			continue;
		value = *((struct config_string *) var)->variable;
		if (value != NULL && value[0] != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid configuration parameter name \"%s\"",
							var->name),
					 errdetail("\"%s\" is a reserved prefix.", FENCING_GUC_PREFIX),
					 errhint("An unfenced write is refused while \"%s\" is set; declare the token with SET LOCAL fencing.token.",
							 var->name)));
	}
#endif
}
