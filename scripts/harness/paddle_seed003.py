"""Seed 003's five models in Paddle: torch_seed003.py written for Paddle, layer for layer (see there for what each
model is), with the same initialisation scheme (paddle_layers.py) and the same configurations (model_specs.py).
Each model's loss is inside it; its optimizer is paddle_trainer.py's.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
from model_specs import (
    BERT_LN_EPS,
    BERT_MASK_BIAS,
    BOTTLENECK_EXPANSION,
    DEEPLAB_OUTPUT_STRIDE,
    GAN_LEAKY_SLOPE,
    IGNORE_INDEX,
    INIT_STD,
    TRANSFORMER_LN_EPS,
    TRANSFORMER_MASK_BIAS,
    TRANSFORMER_PAD,
    resnet_stages,
    resnext_width,
    sinusoid_table,
)
from paddle import nn
from paddle.nn import initializer
from paddle_layers import (
    attr,
    bn2d,
    check_images,
    conv,
    embedding,
    gan_conv,
    gan_deconv,
    instance_norm,
    layer_norm,
    linear,
    normal_linear,
    reflect,
    shortcut,
    xavier_linear,
)


# ---------------------------------------------------------------- SE-ResNeXt50 (32x4d)
class SEModule(nn.Layer):
    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        self.fc1 = linear(channels, channels // reduction)
        self.fc2 = linear(channels // reduction, channels)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        s = x.mean(axis=[2, 3])
        s = F.sigmoid(self.fc2(F.relu(self.fc1(s))))
        return x * s.unsqueeze([2, 3])


class SEResNeXtBottleneck(nn.Layer):
    def __init__(self, in_ch: int, planes: int, cardinality: int, base_width: int, reduction: int,
                 stride: int = 1) -> None:
        super().__init__()
        width = resnext_width(planes, cardinality, base_width)
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, width, 1)
        self.bn1 = bn2d(width)
        self.conv2 = conv(width, width, 3, stride=stride, groups=cardinality)
        self.bn2 = bn2d(width)
        self.conv3 = conv(width, out_ch, 1)
        self.bn3 = bn2d(out_ch)
        self.se = SEModule(out_ch, reduction)
        self.downsample = shortcut(in_ch, out_ch, stride)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return F.relu(out + identity)


class SEResNeXt50(nn.Layer):
    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = conv(3, cfg["stem"], 7, stride=2)
        self.bn1 = bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(SEResNeXtBottleneck(in_ch, planes, cfg["cardinality"], cfg["base_width"],
                                                cfg["reduction"], stride) for in_ch, planes, stride, _ in stage))
            for stage in resnet_stages(cfg["stem"], cfg["blocks"], cfg["planes"]))
        self.fc = linear(cfg["planes"][-1] * BOTTLENECK_EXPANSION, num_classes)

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return F.cross_entropy(self.fc(x.mean(axis=[2, 3])), labels)


# ---------------------------------------------------------------- DeepLabV3+ (ResNet50 backbone, output stride 16)
class DilatedBottleneck(nn.Layer):
    def __init__(self, in_ch: int, planes: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, planes, 1)
        self.bn1 = bn2d(planes)
        self.conv2 = conv(planes, planes, 3, stride=stride, dilation=dilation)
        self.bn2 = bn2d(planes)
        self.conv3 = conv(planes, out_ch, 1)
        self.bn3 = bn2d(out_ch)
        self.downsample = shortcut(in_ch, out_ch, stride)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


def _conv_bn_relu(in_ch: int, out_ch: int, kernel: int, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(conv(in_ch, out_ch, kernel, dilation=dilation), bn2d(out_ch), nn.ReLU())


def _resize(x: paddle.Tensor, size) -> paddle.Tensor:
    return F.interpolate(x, size=[int(size[0]), int(size[1])], mode="bilinear", align_corners=False)


class DeepLabV3Plus(nn.Layer):
    OUTPUT_STRIDE = DEEPLAB_OUTPUT_STRIDE

    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = conv(3, cfg["stem"], 7, stride=2)
        self.bn1 = bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(DilatedBottleneck(*block) for block in stage))
            for stage in resnet_stages(cfg["stem"], cfg["blocks"], cfg["planes"], self.OUTPUT_STRIDE))
        in_ch, low_ch = (planes * BOTTLENECK_EXPANSION for planes in (cfg["planes"][-1], cfg["planes"][0]))
        aspp = cfg["aspp"]
        self.aspp = nn.LayerList([_conv_bn_relu(in_ch, aspp, 1)] +
                                 [_conv_bn_relu(in_ch, aspp, 3, dilation=r) for r in cfg["rates"]])
        self.aspp_pool = _conv_bn_relu(in_ch, aspp, 1)
        self.aspp_project = _conv_bn_relu(aspp * (len(cfg["rates"]) + 2), aspp, 1)
        self.low_level = _conv_bn_relu(low_ch, cfg["low_level"], 1)
        self.decoder = nn.Sequential(_conv_bn_relu(aspp + cfg["low_level"], cfg["decoder"], 3),
                                     _conv_bn_relu(cfg["decoder"], cfg["decoder"], 3))
        self.classifier = conv(cfg["decoder"], num_classes, 1, bias=True)

    def logits(self, images: paddle.Tensor) -> paddle.Tensor:
        check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        low = self.layer1(x)
        x = self.layer4(self.layer3(self.layer2(low)))
        pooled = self.aspp_pool(x.mean(axis=[2, 3], keepdim=True))
        branches = [branch(x) for branch in self.aspp]
        branches.append(_resize(pooled, x.shape[2:]))
        x = self.aspp_project(paddle.concat(branches, axis=1))
        x = _resize(x, low.shape[2:])
        x = self.decoder(paddle.concat([x, self.low_level(low)], axis=1))
        return _resize(self.classifier(x), images.shape[2:])

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        return F.cross_entropy(self.logits(images), labels, ignore_index=IGNORE_INDEX, axis=1)


# ---------------------------------------------------------------- attention blocks shared by BERT and Transformer
class MultiHeadAttention(nn.Layer):
    def __init__(self, d_model: int, heads: int, dropout: float, init) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head = heads, d_model // heads
        self.q, self.k, self.v, self.out = (init(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: paddle.Tensor, memory: paddle.Tensor, bias: paddle.Tensor | None) -> paddle.Tensor:
        b, lq, lk = query.shape[0], query.shape[1], memory.shape[1]
        q = self.q(query).reshape([b, lq, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        k = self.k(memory).reshape([b, lk, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        v = self.v(memory).reshape([b, lk, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        scores = paddle.matmul(q, k, transpose_y=True) * (self.d_head ** -0.5)
        if bias is not None:
            scores = scores + bias
        weights = self.dropout(F.softmax(scores, axis=-1))
        context = paddle.matmul(weights, v).transpose([0, 2, 1, 3]).reshape([b, lq, self.heads * self.d_head])
        return self.out(context)


class FeedForward(nn.Layer):
    def __init__(self, d_model: int, d_inner: int, dropout: float, init, activation) -> None:
        super().__init__()
        self.fc1, self.fc2 = init(d_model, d_inner), init(d_inner, d_model)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


# ---------------------------------------------------------------- BERT-base pre-training (MLM + NSP)
class BertLayer(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h, p = cfg["hidden"], cfg["dropout"]
        self.attention = MultiHeadAttention(h, cfg["heads"], p, normal_linear)
        self.norm1 = layer_norm(h, BERT_LN_EPS)
        self.ffn = FeedForward(h, cfg["intermediate"], 0.0, normal_linear, F.gelu)
        self.norm2 = layer_norm(h, BERT_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x: paddle.Tensor, bias: paddle.Tensor) -> paddle.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, x, bias)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class BertPretraining(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = embedding(cfg["vocab"], h, INIT_STD)
        self.position_embeddings = embedding(cfg["max_position"], h, INIT_STD)
        self.token_type_embeddings = embedding(cfg["type_vocab"], h, INIT_STD)
        self.embedding_norm = layer_norm(h, BERT_LN_EPS)
        self.embedding_dropout = nn.Dropout(cfg["dropout"])
        self.layers = nn.LayerList([BertLayer(cfg) for _ in range(cfg["layers"])])
        self.pooler = normal_linear(h, h)
        self.mlm_transform = normal_linear(h, h)
        self.mlm_norm = layer_norm(h, BERT_LN_EPS)
        self.mlm_bias = self.create_parameter(shape=[cfg["vocab"]], dtype="float32", is_bias=True,
                                              attr=attr(initializer.Constant(0.0)))
        self.nsp = normal_linear(h, 2)

    def forward(self, input_ids, token_type_ids, input_mask, masked_positions, masked_labels, nsp_labels):
        b, length = input_ids.shape
        positions = paddle.arange(length, dtype="int64")
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions).unsqueeze(0)
             + self.token_type_embeddings(token_type_ids))
        x = self.embedding_dropout(self.embedding_norm(x))
        bias = ((1.0 - input_mask) * BERT_MASK_BIAS).unsqueeze([1, 2])
        for layer in self.layers:
            x = layer(x, bias)
        pooled = paddle.tanh(self.pooler(x[:, 0]))
        nsp_loss = F.cross_entropy(self.nsp(pooled), nsp_labels)
        masked = paddle.index_select(x.reshape([b * length, -1]), masked_positions, axis=0)
        masked = self.mlm_norm(F.gelu(self.mlm_transform(masked)))
        mlm_logits = paddle.matmul(masked, self.word_embeddings.weight, transpose_y=True) + self.mlm_bias
        return F.cross_entropy(mlm_logits, masked_labels) + nsp_loss


# ---------------------------------------------------------------- Transformer base (pre-LN, as Paddle's)
class TransformerLayer(nn.Layer):
    def __init__(self, cfg: dict, cross: bool) -> None:
        super().__init__()
        d, p = cfg["d_model"], cfg["dropout"]
        self.self_attention = MultiHeadAttention(d, cfg["heads"], p, xavier_linear)
        self.norm1 = layer_norm(d, TRANSFORMER_LN_EPS)
        self.cross_attention = MultiHeadAttention(d, cfg["heads"], p, xavier_linear) if cross else None
        self.norm_cross = layer_norm(d, TRANSFORMER_LN_EPS) if cross else None
        self.ffn = FeedForward(d, cfg["d_inner"], p, xavier_linear, F.relu)
        self.norm2 = layer_norm(d, TRANSFORMER_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x, self_bias, memory=None, memory_bias=None):
        y = self.norm1(x)
        x = x + self.dropout(self.self_attention(y, y, self_bias))
        if self.cross_attention is not None:
            x = x + self.dropout(self.cross_attention(self.norm_cross(x), memory, memory_bias))
        return x + self.dropout(self.ffn(self.norm2(x)))


class Transformer(nn.Layer):
    PAD = TRANSFORMER_PAD

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        d = cfg["d_model"]
        self.d_model, self.smoothing = d, cfg["label_smoothing"]
        self.embedding = embedding(cfg["vocab"], d, d ** -0.5)
        self.positions = paddle.to_tensor(sinusoid_table(cfg["max_length"], d))
        self.positions.stop_gradient = True
        self.dropout = nn.Dropout(cfg["dropout"])
        self.encoder = nn.LayerList([TransformerLayer(cfg, cross=False) for _ in range(cfg["layers"])])
        self.encoder_norm = layer_norm(d, TRANSFORMER_LN_EPS)
        self.decoder = nn.LayerList([TransformerLayer(cfg, cross=True) for _ in range(cfg["layers"])])
        self.decoder_norm = layer_norm(d, TRANSFORMER_LN_EPS)

    def embed(self, ids: paddle.Tensor) -> paddle.Tensor:
        x = self.embedding(ids) * (self.d_model ** 0.5) + self.positions[: ids.shape[1]].unsqueeze(0)
        return self.dropout(x)

    def forward(self, src_ids, trg_ids, trg_labels):
        src_bias = ((src_ids == self.PAD).astype("float32") * TRANSFORMER_MASK_BIAS).unsqueeze([1, 2])
        length = trg_ids.shape[1]
        future = paddle.full([length, length], TRANSFORMER_MASK_BIAS, dtype="float32")
        causal = paddle.triu(future, diagonal=1).unsqueeze([0, 1])
        x = self.embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_bias)
        memory = self.encoder_norm(x)
        y = self.embed(trg_ids)
        for layer in self.decoder:
            y = layer(y, causal, memory, src_bias)
        vocab = self.embedding.weight.shape[0]
        logits = paddle.matmul(self.decoder_norm(y), self.embedding.weight, transpose_y=True).reshape([-1, vocab])
        labels = trg_labels.reshape([-1])
        # as models_torch: cross_entropy + logsumexp (Paddle's CPU log_softmax takes minutes at 37k classes)
        nll = F.cross_entropy(logits, labels, reduction="none").reshape([-1])
        smooth = paddle.logsumexp(logits, axis=-1) - logits.mean(axis=-1)
        loss = (1.0 - self.smoothing) * nll + self.smoothing * smooth
        weights = (labels != self.PAD).astype("float32")
        return (loss * weights).sum() / weights.sum()


# ---------------------------------------------------------------- CycleGAN
class ResnetBlock(nn.Layer):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            reflect(1), gan_conv(channels, channels, 3), instance_norm(channels), nn.ReLU(),
            reflect(1), gan_conv(channels, channels, 3), instance_norm(channels))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x + self.block(x)


class ResnetGenerator(nn.Layer):
    def __init__(self, ngf: int, res_blocks: int) -> None:
        super().__init__()
        layers = [reflect(3), gan_conv(3, ngf, 7), instance_norm(ngf), nn.ReLU()]
        for mult in (1, 2):
            layers += [gan_conv(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1),
                       instance_norm(ngf * mult * 2), nn.ReLU()]
        layers += [ResnetBlock(ngf * 4) for _ in range(res_blocks)]
        for mult in (4, 2):
            layers += [gan_deconv(ngf * mult, ngf * mult // 2), instance_norm(ngf * mult // 2), nn.ReLU()]
        layers += [reflect(3), gan_conv(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.model(x)


class PatchDiscriminator(nn.Layer):
    def __init__(self, ndf: int, n_layers: int) -> None:
        super().__init__()
        layers = [gan_conv(3, ndf, 4, stride=2, padding=1), nn.LeakyReLU(GAN_LEAKY_SLOPE)]
        mult = 1
        for n in range(1, n_layers + 1):
            prev, mult = mult, min(2 ** n, 8)
            layers += [gan_conv(ndf * prev, ndf * mult, 4, stride=2 if n < n_layers else 1, padding=1),
                       instance_norm(ndf * mult), nn.LeakyReLU(GAN_LEAKY_SLOPE)]
        layers.append(gan_conv(ndf * mult, 1, 4, stride=1, padding=1))
        self.model = nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.model(x)


class CycleGAN(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.lambda_cycle, self.lambda_identity = cfg["lambda_cycle"], cfg["lambda_identity"]
        self.g_a = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.g_b = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.d_a = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])
        self.d_b = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])

    def generator_parameters(self):
        return [*self.g_a.parameters(), *self.g_b.parameters()]

    def discriminator_parameters(self):
        return [*self.d_a.parameters(), *self.d_b.parameters()]

    @staticmethod
    def _gan(prediction: paddle.Tensor, target: float) -> paddle.Tensor:
        return ((prediction - target) ** 2).mean()

    def forward(self, real_a: paddle.Tensor, real_b: paddle.Tensor):
        fake_b, fake_a = self.g_a(real_a), self.g_b(real_b)
        cycle = (self.g_b(fake_b) - real_a).abs().mean() + (self.g_a(fake_a) - real_b).abs().mean()
        identity = (self.g_a(real_b) - real_b).abs().mean() + (self.g_b(real_a) - real_a).abs().mean()
        loss = (self._gan(self.d_a(fake_b), 1.0) + self._gan(self.d_b(fake_a), 1.0)
                + self.lambda_cycle * cycle + self.lambda_cycle * self.lambda_identity * identity)
        return loss, fake_a, fake_b

    def discriminator_loss(self, real_a, real_b, fake_a, fake_b) -> paddle.Tensor:
        loss_a = (self._gan(self.d_a(real_b), 1.0) + self._gan(self.d_a(fake_b), 0.0)) * 0.5
        loss_b = (self._gan(self.d_b(real_a), 1.0) + self._gan(self.d_b(fake_a), 0.0)) * 0.5
        return loss_a + loss_b


# model_specs.build_model builds them: (classes, configuration) for the first two, else (configuration)
SEED003 = {"se_resnext50": SEResNeXt50, "deeplabv3p": DeepLabV3Plus, "bert": BertPretraining,
           "transformer": Transformer, "cyclegan": CycleGAN}
