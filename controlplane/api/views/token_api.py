"""The caller's own API tokens as JSON (the token page's list, create and revoke), for the
command line. A token's secret is in the one answer that creates it, never again."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from .. import selectors, services
from ..forms import TokenCreateForm
from ..models import APIToken
from ..pagination import NewestIdPagination
from .base import APIView, row_or_404


class TokenSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(help_text="active, expired or revoked")

    class Meta:
        model = APIToken
        fields = [
            "id",
            "name",
            "prefix",
            "state",
            "created_at",
            "last_used_at",
            "expires_at",
            "revoked_at",
        ]
        read_only_fields = fields

    def get_state(self, token: APIToken) -> str:
        return token.state()


class IssuedTokenSerializer(TokenSerializer):
    secret = serializers.CharField(
        read_only=True, help_text="The whole token, shown this once and stored nowhere."
    )

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer):
    """The JSON's shape; the token page's form then applies its own rules to it."""

    name = serializers.CharField(max_length=100, help_text="What uses it, e.g. ci-deploy.")
    expires_in_days = serializers.IntegerField(
        required=False, allow_null=True, help_text="1 to 3650; empty: never."
    )

    def page_form(self) -> TokenCreateForm:
        """The token page's form over the validated JSON: its rules are the one copy."""
        form = TokenCreateForm({k: v for k, v in self.validated_data.items() if v is not None})
        if not form.is_valid():
            raise serializers.ValidationError(
                {
                    field: [e["message"] for e in errors]
                    for field, errors in form.errors.get_json_data().items()
                }
            )
        return form


class TokenList(APIView):
    serializer_class = TokenSerializer
    pagination_class = NewestIdPagination

    def get_queryset(self) -> QuerySet[APIToken]:
        return selectors.tokens_of(user=self.request.user)

    @extend_schema(
        operation_id="my_tokens_list",
        summary="Your API tokens, newest first (never their secrets)",
        responses=TokenSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.page_response(self.get_queryset())

    @extend_schema(
        operation_id="my_tokens_create",
        summary="Create a token for yourself; its secret is in this answer only",
        request=TokenCreateSerializer,
        responses={201: IssuedTokenSerializer, 400: OpenApiResponse(description="Bad input.")},
    )
    def post(self, request: Request) -> Response:
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        form = body.page_form()
        issued = services.token_create(
            user=request.user, name=form.cleaned_data["name"], expires_at=form.expires_at()
        )
        answer = {**TokenSerializer(issued.token).data, "secret": issued.secret}
        # The one response that carries the secret: keep it out of every cache.
        return Response(
            answer, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"}
        )


class TokenRevoke(APIView):
    serializer_class = TokenSerializer

    @extend_schema(
        operation_id="my_tokens_revoke",
        summary="Revoke one of your tokens (again: nothing changes)",
        request=None,
        responses={200: TokenSerializer, 404: OpenApiResponse(description="Not one of yours.")},
    )
    def post(self, request: Request, pk: int) -> Response:
        # Someone else's token is a 404, as if it did not exist.
        token: Any = row_or_404(selectors.tokens_of(user=request.user), pk, "token")
        return Response(TokenSerializer(services.token_revoke(token=token, user=request.user)).data)
