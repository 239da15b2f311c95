"""The C launcher: a launch of a seen specialization with no Python frame per argument.

``build_specialized_path`` (runtime/launch.py) generates a Python function per
specialization that checks the arguments against the specialization's key and packs
them into the driver launcher's buffer.  Where a C compiler and Python's headers exist,
that function becomes the *fallback* of a ``CLaunch`` object made here, which the kernel
launches through instead: one C call that does the same checks on the common launch
(every argument positional, no launch options as keywords, a tuple or int grid), writes
the launch config and the arguments into the same buffer at the same offsets, and calls
``cuLaunchKernelEx`` through its function pointer.  It raises no error of its own: any
launch it cannot serve exactly as the Python function would -- an argument of another
dtype, device, alignment, class or value range, a grid callable, keywords, a stale
global or ``COMPILE_ENV`` variable, a kernel whose caches were cleared, anything that
raised -- is handed to the fallback with the same arguments, which explains, redirects
or launches as before.  A nonzero ``CUresult`` goes to the same ``failed`` callback as
the Python path's (retry on a thread without a context, else a ``CudaError``).

The C source is one module for every kernel, compiled once per machine with the system C
compiler against this Python's headers (``cc -O2 -shared -fPIC``) and kept in
``cache_dir()/launcher/<key>/``; the key covers the source, the Python version and ABI
suffix, the compiler (path, size, mtime) and the flags.  The per-specialization part is a
table of argument specs built from the key.  ``TLXC_C_LAUNCHER=0`` switches it off; without
a compiler or headers, launches take the Python path after one ``CLauncherWarning``.

The module also holds a fake launch function (``fake_launch_address``) that records the
config it was handed and returns a settable ``CUresult``: the CPU tests check the bytes the
C launcher writes against the Python path's, and ``bench/launch_host_probe.py`` times both
paths against it.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
from pathlib import Path

ARG_TENSOR, ARG_DESCRIPTOR, ARG_NUMBER, ARG_CONSTANT, ARG_NONE = 1, 2, 3, 4, 5
# C kinds of the packed slots, as driver.PARAM_KINDS names them
SLOT_KINDS = {"u64": 0, "i64": 1, "u32": 2, "i32": 3, "f32": 4, "f64": 5, "bytes128": 6}

_FLAGS = ("-O2", "-shared", "-fPIC", "-fno-strict-aliasing", "-Wall")
_MODULE = "_tlxc_c_launcher"


class CLauncherWarning(UserWarning):
    """The C launcher could not be built: launches take the (slower) Python path."""


SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

typedef int (*launch_fn)(void *config, void *function, void **params, void **extra);

/* cuda.h's CUlaunchConfig (runtime/driver.py checks the same layout with ctypes) */
typedef struct {
    unsigned int gx, gy, gz, bx, by, bz, smem;
    void *stream;
    void *attrs;
    unsigned int num_attrs;
} LaunchConfig;

enum { ARG_TENSOR = 1, ARG_DESCRIPTOR, ARG_NUMBER, ARG_CONSTANT, ARG_NONE };
enum { K_U64 = 0, K_I64, K_U32, K_I32, K_F32, K_F64, K_B128 };

typedef struct {
    int kind;
    PyObject *cls;         /* number, constant: the class; tensor: the dtype; descriptor: the type key */
    PyObject *value;       /* constant: the value */
    long long device;      /* tensor, descriptor */
    int alignment;         /* tensor: data_ptr() & 15 */
    int one, by16, fits;   /* number: == 1, % 16 == 0, in i32 */
    int slot_kind;         /* K_*, or -1: not a runtime argument */
    char *dest;            /* where its value is packed */
} ArgSpec;

typedef struct {
    PyObject *holder, *name, *attrs, *value;
    int cell;
} Guard;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t nparams;
    ArgSpec *args;
    PyObject *names, *defaults;       /* the parameters' names; their defaults (Ellipsis: none) */
    PyObject *meta_options;           /* ((launch option, its default), ...) for a grid callable's meta */
    PyObject *options, *required;     /* launch options a keyword may give: name -> the key's value;
                                         the names a launch must give (the key's non-default ones) */
    Py_ssize_t nenv;
    PyObject **env_dict, **env_key, **env_value;   /* env_value NULL: must be unset */
    Py_ssize_t nguards;
    Guard *guards;
    PyObject *fallback, *kfn, *cache, *stream_getter, *device, *compiled, *failed, *keep;
    LaunchConfig *config;
    void *function;
    void **params;
    launch_fn launch;
    unsigned int bx, by, bz, smem, num_attrs, cx, cy, cz;
    void *attrs;
} CLaunch;

static PyObject *s_data_ptr, *s_get_device, *s_dtype, *s_base, *s_last_address, *s_last_blob,
                *s_encode, *s_type_key, *s_device_index, *s_fast, *s_other;

static PyObject *fallback(CLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyErr_Occurred())
        PyErr_Clear();
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* torch.Tensor and the C functions behind its data_ptr(), get_device() and .dtype
   (set_tensor_type); NULL until then */
static PyTypeObject *tensor_type;
static PyCFunction tensor_data_ptr, tensor_get_device;
static getter tensor_dtype;
static void *tensor_dtype_closure;

static int no_instance_dict(PyObject *a)
{
    PyObject **dict = _PyObject_GetDictPtr(a);
    return dict == NULL || *dict == NULL || PyDict_GET_SIZE(*dict) == 0;
}

static PyCFunction noargs_function(PyObject *descr)
{
    if (!PyObject_TypeCheck(descr, &PyMethodDescr_Type))
        return NULL;
    PyMethodDef *def = ((PyMethodDescrObject *)descr)->d_method;
    return (def->ml_flags & ~METH_COEXIST) == METH_NOARGS ? def->ml_meth : NULL;
}

static PyObject *set_tensor_type(PyObject *m, PyObject *args)
{
    PyObject *type, *data_ptr, *get_device, *dtype;
    if (!PyArg_ParseTuple(args, "O!OOO", &PyType_Type, &type, &data_ptr, &get_device, &dtype))
        return NULL;
    PyCFunction d = noargs_function(data_ptr), g = noargs_function(get_device);
    if (d == NULL || g == NULL || !PyObject_TypeCheck(dtype, &PyGetSetDescr_Type)
            || ((PyGetSetDescrObject *)dtype)->d_getset->get == NULL)
        Py_RETURN_FALSE;           /* another torch: the attribute lookups serve */
    Py_INCREF(type); Py_INCREF(data_ptr); Py_INCREF(get_device); Py_INCREF(dtype);   /* kept for good */
    tensor_data_ptr = d;
    tensor_get_device = g;
    tensor_dtype = ((PyGetSetDescrObject *)dtype)->d_getset->get;
    tensor_dtype_closure = ((PyGetSetDescrObject *)dtype)->d_getset->closure;
    tensor_type = (PyTypeObject *)type;
    Py_RETURN_TRUE;
}

static int to_long(PyObject *r, long long *out)
{
    if (r == NULL)
        return -1;
    int overflow = 0;
    *out = PyLong_Check(r) ? PyLong_AsLongLongAndOverflow(r, &overflow) : -1;
    int bad = !PyLong_Check(r) || overflow || (*out == -1 && PyErr_Occurred());
    Py_DECREF(r);
    return bad ? -1 : 0;
}

static int call_long(PyObject *obj, PyObject *method, long long *out)
{
    PyObject *a[1] = {obj};
    return to_long(PyObject_VectorcallMethod(method, a, 1, NULL), out);
}

/* torch.Tensor's data_ptr(), by its C function for a plain tensor */
static int tensor_ptr(PyObject *a, long long *ptr)
{
    if (Py_TYPE(a) == tensor_type && no_instance_dict(a))
        return to_long(tensor_data_ptr(a, NULL), ptr);
    return call_long(a, s_data_ptr, ptr);
}

/* obj.name (a new reference), from ``dict`` when given and holding it */
static PyObject *field(PyObject *obj, PyObject *dict, PyObject *name)
{
    if (dict != NULL) {
        PyObject *v = PyDict_GetItemWithError(dict, name);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_GetAttr(obj, name);
}

/* 1: the argument has the spec's key entry and its value is packed; 0: not */
static int check_and_pack(ArgSpec *s, PyObject *a)
{
    switch (s->kind) {
    case ARG_NONE:
        return a == Py_None;
    case ARG_CONSTANT: {
        if ((PyObject *)Py_TYPE(a) != s->cls)
            return 0;
        PyObject *ne = PyObject_RichCompare(a, s->value, Py_NE);
        if (ne == NULL)
            return 0;
        int differs = PyObject_IsTrue(ne);
        Py_DECREF(ne);
        return differs == 0;
    }
    case ARG_TENSOR: {
        long long ptr, device;
        PyObject *dtype;
        if (Py_TYPE(a) == tensor_type && no_instance_dict(a)) {
            /* torch.Tensor itself: its own C functions, as the attribute lookups would find them */
            if (to_long(tensor_data_ptr(a, NULL), &ptr) < 0 || (dtype = tensor_dtype(a, tensor_dtype_closure)) == NULL)
                return 0;
            Py_DECREF(dtype);
            if (dtype != s->cls || to_long(tensor_get_device(a, NULL), &device) < 0)
                return 0;
        } else {
            if (call_long(a, s_data_ptr, &ptr) < 0 || (dtype = PyObject_GetAttr(a, s_dtype)) == NULL)
                return 0;
            Py_DECREF(dtype);              /* (compared by identity, as the Python path does) */
            if (dtype != s->cls || call_long(a, s_get_device, &device) < 0)
                return 0;
        }
        if (device != s->device || (ptr & 15) != s->alignment || ptr < 0)
            return 0;
        if (s->slot_kind == K_U64) {
            uint64_t v = (uint64_t)ptr;
            memcpy(s->dest, &v, 8);
            return 1;
        }
        return s->slot_kind < 0;
    }
    case ARG_DESCRIPTOR: {
        long long device, address, last;
        /* a descriptor of exactly the class checked at build time keeps these fields in its
           __dict__ (no class attribute of those names): read there, else looked up */
        PyObject *dict = (PyObject *)Py_TYPE(a) == s->value ? PyObject_GenericGetDict(a, NULL) : NULL;
        if (dict == NULL && PyErr_Occurred())
            return 0;
        int ok = 0;
        PyObject *type_key = field(a, dict, s_type_key), *base = NULL, *last_obj = NULL, *blob = NULL;
        if (type_key == NULL || PyObject_RichCompareBool(type_key, s->cls, Py_EQ) != 1
                || to_long(field(a, dict, s_device_index), &device) < 0 || device != s->device
                || (base = field(a, dict, s_base)) == NULL || tensor_ptr(base, &address) < 0
                || (last_obj = field(a, dict, s_last_address)) == NULL)
            goto done;
        int overflow = 0;
        last = PyLong_Check(last_obj) ? PyLong_AsLongLongAndOverflow(last_obj, &overflow) : 0;
        if (PyErr_Occurred())
            goto done;
        if (PyLong_Check(last_obj) && !overflow && last == address) {
            blob = field(a, dict, s_last_blob);
        } else {
            PyObject *args[1] = {a};
            blob = PyObject_VectorcallMethod(s_encode, args, 1, NULL);
        }
        ok = blob != NULL && PyBytes_Check(blob) && PyBytes_GET_SIZE(blob) == 128 && s->slot_kind == K_B128;
        if (ok)
            memcpy(s->dest, PyBytes_AS_STRING(blob), 128);
    done:
        Py_XDECREF(dict); Py_XDECREF(type_key); Py_XDECREF(base); Py_XDECREF(last_obj); Py_XDECREF(blob);
        return ok;
    }
    case ARG_NUMBER: {
        if ((PyObject *)Py_TYPE(a) != s->cls)
            return 0;
        int one, by16, fits;
        long long v = 0;
        double d = 0.0;
        int is_float = PyFloat_Check(a);
        if (is_float) {
            d = PyFloat_AS_DOUBLE(a);
            one = d == 1.0;
            by16 = fmod(d, 16.0) == 0.0;
            fits = d >= -2147483648.0 && d <= 2147483647.0;
        } else if (PyLong_Check(a)) {
            int overflow = 0;
            v = PyLong_AsLongLongAndOverflow(a, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred()))
                return 0;
            one = v == 1;
            by16 = v % 16 == 0;
            fits = v >= -2147483648LL && v <= 2147483647LL;
        } else {
            return 0;
        }
        if (one != s->one || by16 != s->by16 || fits != s->fits)
            return 0;
        switch (s->slot_kind) {
        case -1:
            return 1;
        case K_I32: {
            if (is_float || !fits)
                return 0;
            int32_t x = (int32_t)v;
            memcpy(s->dest, &x, 4);
            return 1;
        }
        case K_I64:
            if (is_float)
                return 0;
            memcpy(s->dest, &v, 8);
            return 1;
        case K_U32: {
            if (is_float || v < 0 || v > 4294967295LL)
                return 0;
            uint32_t x = (uint32_t)v;
            memcpy(s->dest, &x, 4);
            return 1;
        }
        case K_U64: {
            if (is_float || v < 0)
                return 0;
            uint64_t x = (uint64_t)v;
            memcpy(s->dest, &x, 8);
            return 1;
        }
        case K_F32: {
            if (!is_float)
                return 0;
            float x = (float)d;
            if (isinf(x) && !isinf(d))       /* struct's "f" refuses it: the Python path explains */
                return 0;
            memcpy(s->dest, &x, 4);
            return 1;
        }
        case K_F64:
            if (!is_float)
                return 0;
            memcpy(s->dest, &d, 8);
            return 1;
        }
        return 0;
    }
    }
    return 0;
}

static int guards_hold(CLaunch *self)
{
    for (Py_ssize_t i = 0; i < self->nenv; i++) {
        PyObject *now = PyDict_GetItemWithError(self->env_dict[i], self->env_key[i]);
        if (now != self->env_value[i])
            return 0;
    }
    for (Py_ssize_t i = 0; i < self->nguards; i++) {
        Guard *g = &self->guards[i];
        PyObject *v;
        if (g->cell) {
            v = PyCell_GET(g->holder);
            Py_XINCREF(v);
        } else if (PyDict_CheckExact(g->holder)) {
            v = PyDict_GetItemWithError(g->holder, g->name);
            Py_XINCREF(v);
        } else {
            v = PyObject_GetItem(g->holder, g->name);
        }
        if (v == NULL)
            return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(g->attrs); j++) {
            PyObject *next = PyObject_GetAttr(v, PyTuple_GET_ITEM(g->attrs, j));
            Py_DECREF(v);
            if (next == NULL)
                return 0;
            v = next;
        }
        Py_DECREF(v);
        if (v != g->value)
            return 0;
    }
    return 1;
}

static int is_current(CLaunch *self)
{
    PyObject *fast = PyObject_GetAttr(self->kfn, s_fast);
    if (fast == NULL)
        return 0;
    Py_DECREF(fast);
    if (fast == (PyObject *)self)
        return 1;
    PyObject *other = PyObject_GetAttr(self->kfn, s_other);
    if (other == NULL)
        return 0;
    Py_DECREF(other);
    return other == (PyObject *)self;
}

static int grid_dim(PyObject *g, unsigned int *out)
{
    if (!PyLong_CheckExact(g))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(g, &overflow);
    if (overflow || v < 0 || v > 4294967295LL)
        return 0;
    *out = (unsigned int)v;
    return 1;
}

#define MAX_PARAMS 256

/* The value of each parameter, as Python would bind (grid, *args, **kwargs) to the kernel's
   signature; 0 when it would not bind them all (a launch option as a keyword, an unknown,
   missing or repeated argument: the fallback decides). */
static int bind(CLaunch *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **values)
{
    Py_ssize_t given = nargs - 1, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    unsigned int seen = 0;
    if (given > self->nparams)
        return 0;
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        values[i] = i < given ? args[i + 1] : NULL;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = given;
        for (; i < self->nparams; i++)           /* identity first: keywords are interned */
            if (PyTuple_GET_ITEM(self->names, i) == name)
                break;
        if (i == self->nparams)
            for (i = given; i < self->nparams; i++)
                if (PyUnicode_Compare(PyTuple_GET_ITEM(self->names, i), name) == 0)
                    break;
        if (PyErr_Occurred() || (i < self->nparams && values[i] != NULL))
            return 0;
        if (i < self->nparams) {
            values[i] = args[nargs + k];
            continue;
        }
        /* a launch option: the key's value, of the key's class (as _options_check) */
        PyObject *want = PyDict_GetItemWithError(self->options, name), *value = args[nargs + k];
        if (want == NULL || Py_TYPE(value) != Py_TYPE(want))
            return 0;
        PyObject *ne = PyObject_RichCompare(value, want, Py_NE);
        int differs = ne == NULL ? -1 : PyObject_IsTrue(ne);
        Py_XDECREF(ne);
        if (differs != 0)
            return 0;
        for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(self->required); r++)
            if (PyUnicode_Compare(PyTuple_GET_ITEM(self->required, r), name) == 0)
                seen |= 1u << r;
    }
    if (seen != (1u << PyTuple_GET_SIZE(self->required)) - 1)
        return 0;
    for (Py_ssize_t i = given; i < self->nparams; i++)
        if (values[i] == NULL && (values[i] = PyTuple_GET_ITEM(self->defaults, i)) == Py_Ellipsis)
            return 0;
    return 1;
}

static PyObject *launch_impl(CLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyTypeObject CLaunchType;

/* The arguments do not have this launcher's key: as the generated path does, the kernel's
   other specialized path is tried when this one is the kernel's _fast (in C when it is a
   CLaunch), else the generated path decides (the generic path, the slow path, an error). */
static PyObject *mismatch(CLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyErr_Occurred())
        PyErr_Clear();
    PyObject *fast = PyObject_GetAttr(self->kfn, s_fast), *other = NULL;
    if (fast != NULL && fast == (PyObject *)self)
        other = PyObject_GetAttr(self->kfn, s_other);
    Py_XDECREF(fast);
    if (other != NULL && Py_TYPE(other) == &CLaunchType && other != (PyObject *)self) {
        PyObject *result = launch_impl((CLaunch *)other, args, nargsf, kwnames);
        Py_DECREF(other);
        return result;
    }
    Py_XDECREF(other);
    return fallback(self, args, nargsf, kwnames);
}

/* grid (a tuple or list of 1 to 3 ints, or an int) as three uint32; 0 when it is not one */
static int grid_dims(PyObject *grid, unsigned int *g)
{
    g[0] = g[1] = g[2] = 1;
    if (PyTuple_CheckExact(grid) || PyList_CheckExact(grid)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(grid);
        if (n < 1 || n > 3)
            return 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!grid_dim(PySequence_Fast_GET_ITEM(grid, i), &g[i]))
                return 0;
        return 1;
    }
    return grid_dim(grid, &g[0]);
}

/* the generated path with ``grid`` in place of the grid callable it was returned by */
static PyObject *fallback_with_grid(CLaunch *self, PyObject *grid, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf) + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject **copy = PyMem_Malloc(n * sizeof(PyObject *));
    if (copy == NULL)
        return PyErr_NoMemory();
    memcpy(copy, args, n * sizeof(PyObject *));
    copy[0] = grid;
    PyObject *result = fallback(self, copy, PyVectorcall_NARGS(nargsf), kwnames);
    PyMem_Free(copy);
    return result;
}

static PyObject *launch_impl(CLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *values[MAX_PARAMS];
    if (nargs < 1 || PyDict_GET_SIZE(self->cache) == 0 || !is_current(self))
        return fallback(self, args, nargsf, kwnames);
    if (!bind(self, args, nargs, kwnames, values))
        return mismatch(self, args, nargsf, kwnames);
    for (Py_ssize_t i = 0; i < self->nparams; i++)
        if (!check_and_pack(&self->args[i], values[i]))
            return mismatch(self, args, nargsf, kwnames);
    if (!guards_hold(self))
        return fallback(self, args, nargsf, kwnames);
    unsigned int g[3];
    PyObject *grid = args[0], *returned = NULL;      /* returned: by the grid callable */
    if (!grid_dims(grid, g)) {
        if (PyTuple_CheckExact(grid) || PyList_CheckExact(grid) || !PyCallable_Check(grid))
            return fallback(self, args, nargsf, kwnames);
        /* grid(meta): meta holds every argument by name, the launch options' defaults and
           the options given, as the generated path builds it */
        PyObject *meta = PyDict_New();
        int failed = meta == NULL;
        for (Py_ssize_t i = 0; !failed && i < self->nparams; i++)
            failed = PyDict_SetItem(meta, PyTuple_GET_ITEM(self->names, i), values[i]) < 0;
        for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(self->meta_options); i++) {
            PyObject *pair = PyTuple_GET_ITEM(self->meta_options, i);
            failed = PyDict_SetItem(meta, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0;
        }
        for (Py_ssize_t k = 0; !failed && kwnames && k < PyTuple_GET_SIZE(kwnames); k++)
            failed = PyDict_SetItem(meta, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) < 0;
        if (failed) {
            Py_XDECREF(meta);
            return NULL;
        }
        returned = PyObject_CallOneArg(grid, meta);
        Py_DECREF(meta);
        if (returned == NULL)
            return NULL;                 /* the grid callable's own error, as from the generated path */
        if (!grid_dims(returned, g) || PyCallable_Check(returned))
            goto give_up;
    }
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) {
        Py_XDECREF(returned);
        Py_INCREF(self->compiled);
        return self->compiled;
    }
    if (self->cx && (g[0] % self->cx || g[1] % self->cy || g[2] % self->cz))
        goto give_up;
    PyObject *device[1] = {self->device};
    PyObject *stream = PyObject_Vectorcall(self->stream_getter, device, 1, NULL);
    if (stream == NULL) {
        Py_XDECREF(returned);
        return NULL;
    }
    unsigned long long handle = PyLong_Check(stream) ? PyLong_AsUnsignedLongLong(stream) : 0;
    if (!PyLong_Check(stream) || PyErr_Occurred()) {
        Py_DECREF(stream);
        goto give_up;
    }
    Py_XDECREF(returned);
    LaunchConfig *c = self->config;
    c->gx = g[0]; c->gy = g[1]; c->gz = g[2];
    c->bx = self->bx; c->by = self->by; c->bz = self->bz; c->smem = self->smem;
    c->stream = (void *)(uintptr_t)handle;
    c->attrs = self->attrs; c->num_attrs = self->num_attrs;
    int result;
    Py_BEGIN_ALLOW_THREADS        /* as ctypes does: a launch may wait for room in the queue */
    result = self->launch(c, self->function, self->params, NULL);
    Py_END_ALLOW_THREADS
    if (result != 0) {
        PyObject *shape = Py_BuildValue("(III)", g[0], g[1], g[2]);
        PyObject *r = shape ? PyObject_CallFunction(self->failed, "iOO", result, shape, stream) : NULL;
        Py_XDECREF(shape);
        Py_DECREF(stream);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    } else {
        Py_DECREF(stream);
    }
    Py_INCREF(self->compiled);
    return self->compiled;

give_up:    /* the generated path explains it (with the grid callable's result, not calling it again) */
    if (returned == NULL)
        return fallback(self, args, nargsf, kwnames);
    PyObject *explained = fallback_with_grid(self, returned, args, nargsf, kwnames);
    Py_DECREF(returned);
    return explained;
}

static PyObject *launch_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return launch_impl((CLaunch *)op, args, nargsf, kwnames);
}

static void *address_of(PyObject *tuple, Py_ssize_t i)
{
    return PyLong_AsVoidPtr(PyTuple_GET_ITEM(tuple, i));
}

/* CLaunch(fallback, kfn, cache, args, env, guards, stream_getter, device, compiled, failed, keep,
           addresses, shape, names, defaults, options, required, meta_options):
   args: per parameter (kind, cls, value, device, alignment, one, by16, fits, slot_kind, dest address);
   env: (dict, key, value or None); guards: (holder, name, cell, attrs, value);
   addresses: (config, function, params, launch function, attrs); shape: (bx, by, bz, smem, num_attrs,
   cx, cy, cz), cx = 0 without clusters; names: the parameters' (interned); defaults: each parameter's
   default, Ellipsis for none; options: {launch option: the key's value} a keyword may give;
   required: the options a launch must give; meta_options: ((option, default), ...) that a grid
   callable's dict holds */
static PyObject *launch_new(PyTypeObject *type, PyObject *a, PyObject *kw)
{
    PyObject *fb, *kfn, *cache, *args, *env, *guards, *sg, *device, *compiled, *failed, *keep, *addr, *shape;
    PyObject *names, *defaults, *options, *required, *meta_options;
    if (!PyArg_ParseTuple(a, "OOO!O!O!O!OOOOOO!O!O!O!O!O!O!:CLaunch", &fb, &kfn, &PyDict_Type, &cache,
                          &PyTuple_Type, &args, &PyTuple_Type, &env, &PyTuple_Type, &guards, &sg, &device, &compiled,
                          &failed, &keep, &PyTuple_Type, &addr, &PyTuple_Type, &shape, &PyTuple_Type, &names,
                          &PyTuple_Type, &defaults, &PyDict_Type, &options, &PyTuple_Type, &required,
                          &PyTuple_Type, &meta_options))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(meta_options); i++)
        if (!PyTuple_Check(PyTuple_GET_ITEM(meta_options, i)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(meta_options, i)) != 2) {
            PyErr_SetString(PyExc_ValueError, "CLaunch: meta options are (name, default) pairs");
            return NULL;
        }
    if (PyTuple_GET_SIZE(required) > 16) {
        PyErr_SetString(PyExc_ValueError, "CLaunch: at most 16 required options");
        return NULL;
    }
    if (PyTuple_GET_SIZE(addr) != 5 || PyTuple_GET_SIZE(shape) != 8 || PyTuple_GET_SIZE(args) > MAX_PARAMS
            || PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(args)
            || PyTuple_GET_SIZE(defaults) != PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_ValueError, "CLaunch: addresses are 5 ints, shape 8; one name, default and "
                                          "spec per parameter (at most 256)");
        return NULL;
    }
    CLaunch *self = (CLaunch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = launch_call;
    Py_INCREF(fb); self->fallback = fb;
    Py_INCREF(kfn); self->kfn = kfn;
    Py_INCREF(cache); self->cache = cache;
    Py_INCREF(sg); self->stream_getter = sg;
    Py_INCREF(device); self->device = device;
    Py_INCREF(compiled); self->compiled = compiled;
    Py_INCREF(failed); self->failed = failed;
    Py_INCREF(keep); self->keep = keep;
    Py_INCREF(names); self->names = names;
    Py_INCREF(defaults); self->defaults = defaults;
    Py_INCREF(options); self->options = options;
    Py_INCREF(required); self->required = required;
    Py_INCREF(meta_options); self->meta_options = meta_options;
    self->nparams = PyTuple_GET_SIZE(args);
    self->args = PyMem_Calloc(self->nparams ? self->nparams : 1, sizeof(ArgSpec));
    self->nenv = PyTuple_GET_SIZE(env);
    self->env_dict = PyMem_Calloc(self->nenv ? self->nenv : 1, sizeof(PyObject *));
    self->env_key = PyMem_Calloc(self->nenv ? self->nenv : 1, sizeof(PyObject *));
    self->env_value = PyMem_Calloc(self->nenv ? self->nenv : 1, sizeof(PyObject *));
    self->nguards = PyTuple_GET_SIZE(guards);
    self->guards = PyMem_Calloc(self->nguards ? self->nguards : 1, sizeof(Guard));
    if (!self->args || !self->env_dict || !self->env_key || !self->env_value || !self->guards) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->nparams; i++) {
        ArgSpec *s = &self->args[i];
        PyObject *cls, *value, *dest;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(args, i), "iOOLiiiiiO", &s->kind, &cls, &value, &s->device,
                              &s->alignment, &s->one, &s->by16, &s->fits, &s->slot_kind, &dest)) {
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(cls); s->cls = cls;
        Py_INCREF(value); s->value = value;
        s->dest = PyLong_AsVoidPtr(dest);
    }
    for (Py_ssize_t i = 0; i < self->nenv; i++) {
        PyObject *d, *k, *v;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(env, i), "O!OO", &PyDict_Type, &d, &k, &v)) {
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(d); self->env_dict[i] = d;
        Py_INCREF(k); self->env_key[i] = k;
        self->env_value[i] = v == Py_None ? NULL : v;
        Py_XINCREF(self->env_value[i]);
    }
    for (Py_ssize_t i = 0; i < self->nguards; i++) {
        Guard *g = &self->guards[i];
        PyObject *holder, *name, *attrs, *value;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(guards, i), "OOpO!O", &holder, &name, &g->cell, &PyTuple_Type,
                              &attrs, &value)) {
            Py_DECREF(self);
            return NULL;
        }
        if (g->cell && !PyCell_Check(holder)) {
            PyErr_SetString(PyExc_TypeError, "CLaunch: a cell guard needs a cell");
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(holder); g->holder = holder;
        Py_INCREF(name); g->name = name;
        Py_INCREF(attrs); g->attrs = attrs;
        Py_INCREF(value); g->value = value;
    }
    self->config = address_of(addr, 0);
    self->function = address_of(addr, 1);
    self->params = address_of(addr, 2);
    self->launch = (launch_fn)address_of(addr, 3);
    self->attrs = address_of(addr, 4);
    unsigned int *dims[8] = {&self->bx, &self->by, &self->bz, &self->smem, &self->num_attrs,
                             &self->cx, &self->cy, &self->cz};
    for (int i = 0; i < 8; i++)
        *dims[i] = (unsigned int)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(shape, i));
    if (PyErr_Occurred() || self->config == NULL || self->launch == NULL || self->params == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "CLaunch: a null config, params or launch address");
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int launch_traverse(CLaunch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback); Py_VISIT(self->kfn); Py_VISIT(self->cache); Py_VISIT(self->stream_getter);
    Py_VISIT(self->device); Py_VISIT(self->compiled); Py_VISIT(self->failed); Py_VISIT(self->keep);
    Py_VISIT(self->names); Py_VISIT(self->defaults); Py_VISIT(self->options); Py_VISIT(self->required);
    Py_VISIT(self->meta_options);
    if (self->args)
        for (Py_ssize_t i = 0; i < self->nparams; i++) {
            Py_VISIT(self->args[i].cls);
            Py_VISIT(self->args[i].value);
        }
    if (self->env_dict)
        for (Py_ssize_t i = 0; i < self->nenv; i++) {
            Py_VISIT(self->env_dict[i]); Py_VISIT(self->env_key[i]); Py_VISIT(self->env_value[i]);
        }
    if (self->guards)
        for (Py_ssize_t i = 0; i < self->nguards; i++) {
            Py_VISIT(self->guards[i].holder); Py_VISIT(self->guards[i].name);
            Py_VISIT(self->guards[i].attrs); Py_VISIT(self->guards[i].value);
        }
    return 0;
}

static int launch_clear(CLaunch *self)
{
    Py_CLEAR(self->fallback); Py_CLEAR(self->kfn); Py_CLEAR(self->cache); Py_CLEAR(self->stream_getter);
    Py_CLEAR(self->device); Py_CLEAR(self->compiled); Py_CLEAR(self->failed); Py_CLEAR(self->keep);
    Py_CLEAR(self->names); Py_CLEAR(self->defaults); Py_CLEAR(self->options); Py_CLEAR(self->required);
    Py_CLEAR(self->meta_options);
    if (self->args)
        for (Py_ssize_t i = 0; i < self->nparams; i++) {
            Py_CLEAR(self->args[i].cls);
            Py_CLEAR(self->args[i].value);
        }
    if (self->env_dict)
        for (Py_ssize_t i = 0; i < self->nenv; i++) {
            Py_CLEAR(self->env_dict[i]); Py_CLEAR(self->env_key[i]); Py_CLEAR(self->env_value[i]);
        }
    if (self->guards)
        for (Py_ssize_t i = 0; i < self->nguards; i++) {
            Py_CLEAR(self->guards[i].holder); Py_CLEAR(self->guards[i].name);
            Py_CLEAR(self->guards[i].attrs); Py_CLEAR(self->guards[i].value);
        }
    return 0;
}

static void launch_dealloc(CLaunch *self)
{
    PyObject_GC_UnTrack(self);
    launch_clear(self);
    PyMem_Free(self->args);
    PyMem_Free(self->env_dict); PyMem_Free(self->env_key); PyMem_Free(self->env_value);
    PyMem_Free(self->guards);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *launch_get_fallback(CLaunch *self, void *closure)
{
    Py_INCREF(self->fallback);
    return self->fallback;
}

static PyGetSetDef launch_getset[] = {
    {"fallback", (getter)launch_get_fallback, NULL, "the Python path every launch it cannot serve goes to", NULL},
    {NULL}
};

static PyTypeObject CLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlxc_c_launcher.CLaunch",
    .tp_basicsize = sizeof(CLaunch),
    .tp_dealloc = (destructor)launch_dealloc,
    .tp_vectorcall_offset = offsetof(CLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A launch of one specialization in C (tlxc/runtime/c_launcher.py).",
    .tp_traverse = (traverseproc)launch_traverse,
    .tp_clear = (inquiry)launch_clear,
    .tp_getset = launch_getset,
    .tp_new = launch_new,
};

/* -- kernel[grid] ------------------------------------------------------------------------------
   Subscript replaces KernelFunction.__getitem__ once this module is loaded: when the kernel's
   _fast is a CLaunch it returns a Bound (the launcher and the grid, called with the arguments),
   else it calls the Python __getitem__ it wraps.  A method descriptor, so that kernel[grid]
   calls it with the kernel as its first argument and no bound method in between. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    CLaunch *launch;
    PyObject *grid;
} Bound;

static PyObject *bound_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Bound *self = (Bound *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *result;
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {      /* args[-1] is ours for the call */
        PyObject **slot = (PyObject **)args - 1, *saved = *slot;
        *slot = self->grid;
        result = launch_impl(self->launch, slot, (size_t)(nargs + 1), kwnames);
        *slot = saved;
        return result;
    }
    PyObject *small[24], **stack = total + 1 <= 24 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    stack[0] = self->grid;
    memcpy(stack + 1, args, total * sizeof(PyObject *));
    result = launch_impl(self->launch, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return result;
}

static void bound_dealloc(Bound *self)
{
    Py_XDECREF(self->launch);
    Py_XDECREF(self->grid);
    PyObject_Free(self);
}

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlxc_c_launcher.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "kernel[grid] of a kernel launched by a CLaunch: call it with the arguments.",
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *python;      /* the Python __getitem__ */
} Subscript;

static PyObject *subscript_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Subscript *self = (Subscript *)op;
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL) {
        PyObject *fast = PyObject_GetAttr(args[0], s_fast);
        if (fast == NULL)
            PyErr_Clear();
        else if (Py_TYPE(fast) == &CLaunchType) {
            Bound *b = PyObject_New(Bound, &BoundType);
            if (b == NULL) {
                Py_DECREF(fast);
                return NULL;
            }
            b->vectorcall = bound_call;
            b->launch = (CLaunch *)fast;        /* (the reference GetAttr gave) */
            Py_INCREF(args[1]);
            b->grid = args[1];
            return (PyObject *)b;
        } else {
            Py_DECREF(fast);
        }
    }
    return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
}

static PyObject *subscript_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *python;
    if (!PyArg_ParseTuple(args, "O:Subscript", &python))
        return NULL;
    Subscript *self = (Subscript *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = subscript_call;
    Py_INCREF(python);
    self->python = python;
    return (PyObject *)self;
}

static void subscript_dealloc(Subscript *self)
{
    Py_XDECREF(self->python);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *subscript_get_python(Subscript *self, void *closure)
{
    Py_INCREF(self->python);
    return self->python;
}

static PyGetSetDef subscript_getset[] = {
    {"python", (getter)subscript_get_python, NULL, "the Python __getitem__ it wraps", NULL},
    {NULL}
};

static PyTypeObject SubscriptType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlxc_c_launcher.Subscript",
    .tp_basicsize = sizeof(Subscript),
    .tp_dealloc = (destructor)subscript_dealloc,
    .tp_vectorcall_offset = offsetof(Subscript, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = subscript_get,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "KernelFunction.__getitem__ with the C launcher loaded.",
    .tp_getset = subscript_getset,
    .tp_new = subscript_new,
};

/* -- the fake launch function of the tests and the CPU probe -------------------------------- */
static long long fake_calls;
static int fake_result;
static LaunchConfig fake_config;
static void *fake_function, **fake_params;

static int fake_launch(void *config, void *function, void **params, void **extra)
{
    fake_calls++;
    memcpy(&fake_config, config, sizeof(LaunchConfig));
    fake_function = function;
    fake_params = params;
    return fake_result;
}

static PyObject *fake_launch_address(PyObject *m, PyObject *unused)
{
    return PyLong_FromVoidPtr((void *)fake_launch);
}

static PyObject *fake_state(PyObject *m, PyObject *unused)
{
    return Py_BuildValue("(Ly#NN)", fake_calls, (const char *)&fake_config, (Py_ssize_t)sizeof(LaunchConfig),
                         PyLong_FromVoidPtr(fake_function), PyLong_FromVoidPtr((void *)fake_params));
}

static PyObject *set_fake_result(PyObject *m, PyObject *arg)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    fake_result = (int)v;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"fake_launch_address", fake_launch_address, METH_NOARGS, "address of a cuLaunchKernelEx stand-in"},
    {"fake_state", fake_state, METH_NOARGS, "(calls, config bytes, function, params) of the stand-in"},
    {"set_fake_result", set_fake_result, METH_O, "the CUresult the stand-in returns"},
    {"set_tensor_type", set_tensor_type, METH_VARARGS,
     "set_tensor_type(torch.Tensor, Tensor.data_ptr, Tensor.get_device, Tensor.dtype): call their C functions "
     "for tensors of exactly that type; False (and nothing set) when they are not plain C methods"},
    {NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_tlxc_c_launcher", "tlxc's C launcher (tlxc/runtime/c_launcher.py)", -1,
    module_methods
};

PyMODINIT_FUNC PyInit__tlxc_c_launcher(void)
{
    if (PyType_Ready(&CLaunchType) < 0 || PyType_Ready(&BoundType) < 0 || PyType_Ready(&SubscriptType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_base = PyUnicode_InternFromString("base");
    s_last_address = PyUnicode_InternFromString("_last_address");
    s_last_blob = PyUnicode_InternFromString("_last_blob");
    s_encode = PyUnicode_InternFromString("encode");
    s_type_key = PyUnicode_InternFromString("_type_key");
    s_device_index = PyUnicode_InternFromString("device_index");
    s_fast = PyUnicode_InternFromString("_fast");
    s_other = PyUnicode_InternFromString("_other");
    PyTypeObject *types[3] = {&CLaunchType, &BoundType, &SubscriptType};
    const char *names[3] = {"CLaunch", "Bound", "Subscript"};
    for (int i = 0; i < 3; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
"""


# -- building and loading ---------------------------------------------------------------------

_lock = threading.Lock()
_state: dict = {}           # "module": the loaded module, or None once it could not be built


def enabled() -> bool:
    """``TLXC_C_LAUNCHER`` is not ``0``/``false``/``no``/``off``."""
    return os.environ.get("TLXC_C_LAUNCHER", "").strip().lower() not in ("0", "false", "no", "off")


def compiler() -> str | None:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` on the PATH."""
    for name in (os.environ.get("CC", "").split() or [None])[:1] + ["cc", "gcc", "clang"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def python_include() -> str:
    return sysconfig.get_paths()["include"]


def build_key(cc: str) -> str:
    """Everything that changes the built module: the source, this Python (version, ABI
    suffix, headers), the compiler binary and the flags."""
    h = hashlib.sha256()
    stat = os.stat(os.path.realpath(cc))
    include = python_include()
    for part in (SOURCE, sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", include,
                 os.path.realpath(cc), str(stat.st_size), str(stat.st_mtime_ns), " ".join(_FLAGS)):
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def build(directory: Path | None = None, cc: str | None = None) -> Path:
    """Compile the module (or find it built) and return its path; ``RuntimeError`` saying why
    it cannot be built."""
    from .cache import cache_dir
    cc = cc or compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC, or install cc/gcc/clang)")
    include = python_include()
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise RuntimeError(f"Python's C headers are missing ({include}/Python.h; e.g. the python3-dev package)")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target_dir = (directory or cache_dir() / "launcher") / build_key(cc)
    target = target_dir / f"{_MODULE}{suffix}"
    if target.exists():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tlxc-c-launcher-") as tmp:
        source = Path(tmp) / f"{_MODULE}.c"
        source.write_text(SOURCE)
        built = Path(tmp) / target.name
        done = subprocess.run([cc, *_FLAGS, "-I", include, str(source), "-o", str(built)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        fd, partial = tempfile.mkstemp(dir=target_dir, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(built.read_bytes())
        os.replace(partial, target)         # atomic: a concurrent builder writes the same bytes
    return target


def load(path: Path):
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module():
    """The C launcher module, built and loaded on first use; None when switched off or
    when it cannot be built (one ``CLauncherWarning`` saying why, then the Python path)."""
    if not enabled():
        return None
    if "module" in _state:
        return _state["module"]
    with _lock:
        if "module" not in _state:
            try:
                _state["module"] = load(build())
                _install(_state["module"])
            except Exception as exc:  # noqa: BLE001 - any failure: warn once, launch from Python
                _state["module"] = None
                warnings.warn(f"tlxc: the C launcher could not be built ({exc}); launches take the Python "
                              f"path (a few microseconds slower each; TLXC_C_LAUNCHER=0 silences this)",
                              CLauncherWarning, stacklevel=2)
    return _state["module"]


def _install(module) -> None:
    """``kernel[grid]`` through the module's ``Subscript`` (a ``Bound`` launcher for a kernel
    whose fast path is a ``CLaunch``, else the Python ``__getitem__``); torch's tensor type
    for the direct calls of ``data_ptr``/``get_device``/``dtype``."""
    from .jit import KernelFunction
    current = KernelFunction.__dict__["__getitem__"]
    if not isinstance(current, module.Subscript):
        KernelFunction.__getitem__ = module.Subscript(current)
    try:
        import torch
    except ImportError:
        return
    module.set_tensor_type(torch.Tensor, torch.Tensor.data_ptr, torch.Tensor.get_device, torch.Tensor.dtype)


def function_address(fn) -> int | None:
    """The address of a ctypes foreign function (None for anything else: a Python stand-in)."""
    if isinstance(fn, ctypes._CFuncPtr):
        return ctypes.cast(fn, ctypes.c_void_p).value
    return None
